#!/bin/sh
# Runs inside the freshly debootstrapped root filesystem (chroot) before it is imported into Docker.
# Part of the recipe: changing it changes the image tag.
set -eu

# The unprivileged operator. Debian already has a group called "operator" (gid 37), so reuse it
# (plain `useradd operator` fails with "group operator exists").
useradd -m -u 1000 -g operator -s /bin/bash operator
# A sane interactive-looking environment for the operator and for root.
cat > /etc/profile.d/bashgym.sh <<'PROFILE'
export LANG=C.UTF-8
export LC_ALL=C.UTF-8
export PAGER=cat
export GIT_PAGER=cat
export EDITOR=vi
PROFILE
printf '[user]\n\tname = Operator\n\temail = operator@sandbox.invalid\n[init]\n\tdefaultBranch = main\n' \
  > /home/operator/.gitconfig
chown operator:operator /home/operator/.gitconfig
# No service account here: a container makes `app` only when its session runs as it (sandbox/layout.py,
# account_setup_shell), so tasks that make their own `app`, take uid 999 or build /srv/app as root still can.
# A hostname and an /etc/hosts that do not leak the build machine's.
echo sandbox > /etc/hostname
# Keep the image small: no apt lists, caches, docs or man pages.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/info/* \
       /usr/share/locale/* /tmp/* /var/tmp/*
# A marker that tools can read to know they are inside a bashgym sandbox.
mkdir -p /etc/bashgym && echo "bashgym sandbox base" > /etc/bashgym/image
