"""Git: answering questions from history and making the everyday changes (branch, revert, tag, restore, amend).

Every repository is built in the setup by one script with fixed author/committer identities and dates, so a draw
is deterministic (the same seed gives the same hashes) and fast (a few dozen ``git commit`` calls at most). The
checks read git objects as root, with ``safe.directory=*`` set through the environment so a root check can read a
repository the operator owns.
"""

from __future__ import annotations

import posixpath
from datetime import datetime, timedelta

from bashgym_assets.scenarios.factory.family import Draft, family
from bashgym_assets.scenarios.factory.world import HOME, SERVICES, WORDS, World, quote

SURNAMES = (
    "Shah",
    "Nair",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Kowalski",
    "Tanaka",
    "Silva",
    "Haddad",
    "Novak",
    "Fischer",
    "Oyelaran",
    "Costa",
    "Iversen",
    "Reyes",
    "Murphy",
    "Yilmaz",
    "Petrov",
    "Brandt",
    "Osei",
)
DOMAINS = ("example.com", "example.org", "corp.example", "dev.example.net", "mail.example")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_VERBS = ("Add", "Fix", "Update", "Refactor", "Tidy", "Document", "Tweak", "Rework", "Simplify", "Extend")
_NOUNS = (
    "parser",
    "config loader",
    "retry logic",
    "logging",
    "CLI flags",
    "cache layer",
    "error messages",
    "unit tests",
    "README",
    "build script",
    "date handling",
    "input validation",
    "metrics",
    "docs index",
)
_CHECK_ENV = (
    "export GIT_OPTIONAL_LOCKS=0 GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'"
)


class _Repo:
    """The bash that builds one repository: commits with fixed identities and dates, branches and tags.

    Why a script rather than many setup commands: one ``bash`` call is cheaper than one exec per command, and the
    file contents stay tracked here in Python, so a check can compare against the exact expected text.
    """

    def __init__(self, w: World, path: str, branch: str = "main", start: datetime | None = None) -> None:
        self.w, self.path, self.branch = w, path, branch
        self.time = start or w.date("2022-06-01", 700)
        self.lines = [
            "set -e",
            "export HOME=/root GIT_CONFIG_NOSYSTEM=1",
            f"mkdir -p {quote(path)}",
            f"cd {quote(path)}",
            f"git init -q -b {quote(branch)}",
        ]
        self.trees: dict[str, dict[str, str]] = {branch: {}}
        self.subjects: set[str] = set()
        self.log: list[dict[str, object]] = []  # every commit: subject, author, date, branch, paths

    @property
    def tree(self) -> dict[str, str]:
        return self.trees[self.branch]

    def subject(self) -> str:
        """A commit subject not used before in this repository."""
        for _ in range(60):
            s = f"{self.w.pick(_VERBS)} {self.w.pick(_NOUNS)}"
            if self.w.chance(0.4):
                s += f" in {self.w.pick(SERVICES)}"
            if s not in self.subjects:
                return s
        return f"{self.w.pick(_VERBS)} {self.w.token(5)}"

    def line(self) -> str:
        return f"{self.w.pick(WORDS)}_{self.w.pick(('limit', 'mode', 'name', 'path', 'flag'))} = {self.w.randint(1, 999)}"

    def commit(
        self,
        subject: str | None = None,
        writes: dict[str, str] | None = None,
        deletes: tuple[str, ...] = (),
        author: tuple[str, str] = ("Operator", "operator@example.com"),
        when: datetime | None = None,
        committer: tuple[str, str] | None = None,
    ) -> str:
        subject = subject or self.subject()
        self.subjects.add(subject)
        if when is None:
            self.time += timedelta(minutes=self.w.randint(20, 3000))
            when = self.time
        writes = writes or {}
        for rel, content in writes.items():
            folder = posixpath.dirname(rel)
            if folder:
                self.lines.append(f"mkdir -p {quote(folder)}")
            self.lines.append(f"printf %s {quote(content)} > {quote(rel)}")
            self.tree[rel] = content
        for rel in deletes:
            self.lines.append(f"git rm -q {quote(rel)}")
            self.tree.pop(rel, None)
        cname, cmail = committer or author
        stamp = f"{when:%Y-%m-%d %H:%M:%S} +0000"
        self.lines.append(
            f"git add -A && GIT_AUTHOR_NAME={quote(author[0])} GIT_AUTHOR_EMAIL={quote(author[1])} "
            f"GIT_AUTHOR_DATE={quote(stamp)} GIT_COMMITTER_NAME={quote(cname)} GIT_COMMITTER_EMAIL={quote(cmail)} "
            f"GIT_COMMITTER_DATE={quote(stamp)} git commit -q -m {quote(subject)}"
        )
        self.log.append(
            {
                "subject": subject,
                "author": author,
                "when": when,
                "branch": self.branch,
                "paths": sorted(set(writes) | set(deletes)),
            }
        )
        return subject

    def touch(self, rel: str | None = None, **kw: object) -> str:
        """A commit that appends one line to ``rel`` (or to a random tracked file)."""
        rel = rel or self.w.pick(sorted(self.tree))
        return self.commit(writes={rel: self.tree.get(rel, "") + self.line() + "\n"}, **kw)  # type: ignore[arg-type]

    def branch_off(self, name: str) -> None:
        self.trees[name] = dict(self.tree)
        self.branch = name
        self.lines.append(f"git switch -q -c {quote(name)}")

    def switch(self, name: str) -> None:
        self.branch = name
        self.lines.append(f"git switch -q {quote(name)}")

    def tag(self, name: str, message: str | None = None) -> None:
        stamp = f"{self.time:%Y-%m-%d %H:%M:%S} +0000"
        if message:
            self.lines.append(
                f"GIT_COMMITTER_NAME=Release GIT_COMMITTER_EMAIL=release@example.com "
                f"GIT_COMMITTER_DATE={quote(stamp)} git tag -a {quote(name)} -m {quote(message)}"
            )
        else:
            self.lines.append(f"git tag {quote(name)}")

    def run(self, command: str) -> None:
        self.lines.append(command)

    def install(self, owner: str = "operator") -> tuple[dict[str, str], list[str]]:
        """(files, setup): the build script under /root and the command that runs it, then hands the repo over."""
        script = f"/root/.mkrepo-{self.w.token(6)}.sh"
        lines = list(self.lines)
        if owner != "root":
            top = (
                self.path
                if not self.path.startswith(HOME + "/")
                else HOME + "/" + self.path[len(HOME) + 1 :].split("/")[0]
            )
            lines.append(f"chown -R {owner}:{owner} {quote(top)}")
        return {script: "\n".join(lines) + "\n"}, [f"bash {script} && rm -f {script}"]


def _f(w: World, template: str, **values: object) -> str:
    """A spun fragment for inside a sentence (not capitalised)."""
    return w.spin(template, capitalize=False, **values)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _check(repo: str, *lines: str) -> str:
    return "\n".join(["#!/bin/bash", _CHECK_ENV, f"cd {quote(repo)} || exit 1", *lines]) + "\n"


def _by_subject(subject: str, rev: str = "--all") -> str:
    """Bash for the full hash of the commit whose subject is exactly ``subject``."""
    return (
        f"git log {rev} --format='%H%x09%s' | awk -F'\\t' -v s={quote(subject)} '$2 == s {{print $1; exit}}'"
    )


def _person(w: World, first: str | None = None, not_last: str = "") -> tuple[str, str]:
    first = (first or w.person()).capitalize()
    last = w.pick([s for s in SURNAMES if s != not_last])
    w.note(first, last)
    return f"{first} {last}", f"{first.lower()}.{last.lower()}@{w.pick(DOMAINS)}"


def _repo_path(w: World) -> str:
    name = w.pick((w.project(), w.service(), f"{w.project()}-{w.pick(('app', 'api', 'cli', 'lib', 'web'))}"))
    w.note(name)
    return f"{HOME}/{w.pick(('', '', 'src/', 'code/', 'work/'))}{name}"


def _seed_files(w: World, repo: _Repo, n: int) -> list[str]:
    """A first commit with ``n`` plausible files; returns their paths."""
    pool = [
        "README.md",
        f"src/{w.pick(SERVICES)}.py",
        f"src/{w.pick(WORDS)}.py",
        f"docs/{w.pick(WORDS)}.md",
        "config/settings.ini",
        f"tests/test_{w.pick(WORDS)}.py",
        "Makefile",
        f"scripts/{w.pick(WORDS)}.sh",
        "VERSION",
        f"lib/{w.pick(WORDS)}.js",
    ]
    paths = sorted(set(w.sample(pool, n)))
    repo.commit("Initial commit", writes={p: repo.line() + "\n" for p in paths})
    return paths


# ---- history questions ---------------------------------------------------------------------------------------------
@family(
    "git-author-commit-count",
    "git",
    "count the commits one author made (on a branch, in a month, under a path)",
)
def author_commit_count(w: World) -> Draft:
    root_owned = w.chance(0.25)
    name = w.pick((w.project(), w.service()))
    repo_path = f"/srv/git/{name}" if root_owned else f"{HOME}/{w.pick(('', 'src/', 'repos/'))}{name}"
    scope = w.pick(("head", "head", "all", "month", "path"))
    start = None
    if scope == "month":
        start = datetime(w.randint(2021, 2024), w.randint(1, 9), 1)
    repo = _Repo(w, repo_path, branch=w.pick(("main", "main", "master")), start=start)
    main = repo.branch
    target = _person(w)
    others = [_person(w) for _ in range(w.randint(1, 3))]
    namesake = None
    if w.chance(0.75):  # a namesake: same first name, another person (a bare first-name search overcounts)
        namesake = _person(w, target[0].split()[0], not_last=target[0].split()[1])
        others.append(namesake)
    alt_mail = w.chance(0.3)  # the same person under a second address still counts
    target_ids = [target] + (
        [(target[0], f"{target[0].split()[0].lower()}@{w.pick(DOMAINS)}")] if alt_mail else []
    )
    paths = _seed_files(w, repo, w.randint(3, 6))
    sub = w.pick(("docs", "src", "tests"))
    if scope == "path":
        paths = sorted(set(paths) | {f"{sub}/{w.word()}.{'md' if sub == 'docs' else 'py'}"})

    def when(month: int) -> datetime:
        assert start is not None
        return datetime(start.year, start.month + month, w.randint(5, 25), w.randint(0, 23), w.randint(0, 59))

    n = w.randint(8, 18)
    slots = [w.randint(0, 2) for _ in range(n)] if scope == "month" else []
    slots.sort()
    counted = 0
    for i in range(n):
        who_target = w.chance(0.4)
        author = w.pick(target_ids) if who_target else w.pick(others)
        rel = w.pick(paths)
        stamp = when(slots[i]) if scope == "month" else None
        repo.touch(rel, author=author, when=stamp)
        hit = who_target
        if scope == "month":
            hit = hit and slots[i] == 1
        if scope == "path":
            hit = hit and rel.startswith(sub + "/")
        counted += hit
    if counted == 0:  # the answer is never a trivial zero
        rel = w.pick([p for p in paths if p.startswith(sub + "/")]) if scope == "path" else w.pick(paths)
        repo.touch(rel, author=target, when=when(1) if scope == "month" else None)
        counted = 1
        if scope == "month":  # a later-month commit keeps the order of dates plausible
            repo.touch(author=w.pick(others), when=when(2))
    if namesake:  # at least one of the namesake's commits falls inside the asked scope
        in_scope = [p for p in paths if p.startswith(sub + "/")] if scope == "path" else paths
        repo.touch(w.pick(in_scope), author=namesake, when=when(1) if scope == "month" else None)
    # an unmerged branch where the author also worked: counts only when every branch is asked for
    side = f"{w.pick(('feature', 'wip', 'spike', 'topic'))}/{w.word()}"
    repo.branch_off(side)
    extra = w.randint(1, 3)
    for _ in range(extra):
        repo.touch(author=target, when=when(2) if scope == "month" else None)
    repo.switch(main)
    answer = counted + (extra if scope == "all" else 0)
    files, setup = repo.install(owner="root" if root_owned else "operator")
    if root_owned:
        setup.append("chmod -R a+rX /srv/git")
    out = f"{HOME}/{w.pick(('answer', 'count', 'commits', 'result', 'n_commits'))}{w.pick(('', '_' + w.word()))}.txt"
    month_name = ""
    if scope == "month":
        assert start is not None
        month_name = f"{MONTHS[start.month]} {start.year}"
        w.note(MONTHS[start.month], start.year)
    scope_text = {
        "head": _f(w, "on the {main} branch{| (other branches do not count)}", main=main),
        "all": _f(
            w,
            "{on all branches|across every branch}, {including|counting} {branches that are not merged yet|"
            "unmerged work}",
        ),
        "month": _f(w, "{in|during} {month}", month=month_name),
        "path": _f(
            w,
            "that {touched|changed|modified} something under {sub}/{| (other commits do not count)}",
            sub=sub,
        ),
    }[scope]
    if scope in ("month", "path"):
        scope_text += " " + _f(w, "on the {main} branch", main=main)
    who = target[0] if w.chance(0.8) or alt_mail else f"{target[0]} <{target[1]}>"
    w.note(main, side, sub)
    task = w.phrase(
        "How many commits did {who} {make|author} {scope} in the git repository at {repo}? Write {just|only} the "
        "number to {out}.",
        "{Count|Find out} the commits authored by {who} {scope} in {repo} and {save|write} the {count|number} to "
        "{out}{| as a single number}.",
        "Ticket: for the {contribution report|quarterly review|audit} we need the number of commits by {who} "
        "{scope}. The repository is {repo}; put {just |}the number in {out}.",
        "For {a contributor summary|the release notes} I need to know how many commits {who} authored {scope} in "
        "{repo}. Write that number {alone |}to {out}.",
        "{repo}: commits by {who} {scope} -> {out} (just the number).",
        "hey, quick stats question - how many commits has {who} got {scope} in {repo}? drop the number into {out}, "
        "nothing else",
        who=who,
        scope=scope_text,
        repo=w.path_ref(repo_path),
        out=w.path_ref(out, "file"),
    )
    if root_owned and w.chance(0.5):
        task += " " + w.spin(
            "{Note:|Heads-up:} the repository is owned by root, so git {may|will} refuse to read it "
            "until you mark it as a safe directory{| for your user}."
        )
    check = (
        f"#!/bin/bash\n[ -f {quote(out)} ] || exit 1\n"
        f"[ \"$(tr -d '[:space:]' < {quote(out)})\" = '{answer}' ]\n"
    )
    author_re = quote(target[0] if who == target[0] else target[1])
    count_form = w.pick(("log", "rev-list"))
    rev = "--all" if scope == "all" else main
    since = ""
    if scope == "month":
        assert start is not None
        nxt = datetime(start.year, start.month + 2, 1)
        since = f" --since={start.year}-{start.month + 1:02d}-01 --until={nxt:%Y-%m-%d}"
    limit = f" -- {sub}/" if scope == "path" else ""
    if count_form == "log":
        cmd = f"git log {rev} --author={author_re}{since} --oneline{limit} | wc -l > {quote(out)}"
    else:
        cmd = f"git rev-list --count {rev} --author={author_re}{since}{limit} > {quote(out)}"
    reference = []
    if root_owned:
        reference.append(f"git config --global --add safe.directory {repo_path}")
    reference += [
        f"cd {quote(repo_path)}",
        w.pick(("git shortlog -sne --all", "git log --all --format='%an <%ae>' | sort | uniq -c")),
        cmd,
        f"cat {quote(out)}",
    ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if root_owned or scope != "head" else 2,
        files=files,
        setup=setup,
    )


_STRINGS = (
    "FEATURE_{W}_ENABLED",
    "{w}.internal.example.com",
    "def {w}_{v}(",
    "{w}_token_v{n}",
    "X-{W2}-Trace",
    "{w}_timeout_ms = {n}00",
    "legacy_{w}_mode",
)


@family(
    "git-find-introducing-commit", "git", "find the commit that first added a string (pickaxe) and report it"
)
def find_introducing(w: World) -> Draft:
    repo_path = _repo_path(w)
    repo = _Repo(w, repo_path)
    paths = _seed_files(w, repo, w.randint(3, 6))
    a, b = w.pick(WORDS), w.pick(WORDS)
    needle = w.pick(_STRINGS).format(W=a.upper(), w=a, v=b, n=w.randint(2, 9), W2=a.capitalize())
    w.note(needle)
    authors = [_person(w) for _ in range(w.randint(2, 4))]
    for _ in range(w.randint(2, 6)):
        repo.touch(author=w.pick(authors))
    target_file = w.pick(paths)
    intro_author = w.pick(authors)
    intro = repo.commit(writes={target_file: repo.tree[target_file] + f"{needle}\n"}, author=intro_author)
    removed = w.chance(0.35)
    mention = w.chance(0.5)
    later = w.randint(1, 5)
    events = ["touch"] * later + (["mention"] if mention else []) + (["remove"] if removed else [])
    events = w.shuffled(events)
    for ev in events:
        if ev == "touch":
            repo.touch(w.pick([p for p in paths if p != target_file] or paths), author=w.pick(authors))
        elif ev == "mention":  # its message names the string; its diff does not add it
            repo.touch(
                w.pick([p for p in paths if p != target_file] or paths),
                author=w.pick(authors),
                subject=f"Document {needle.strip('(').strip()} usage",
            )
        else:
            cur = repo.tree[target_file]
            repo.commit(
                f"Remove {w.pick(('dead code', 'unused setting', 'old flag', 'leftovers'))}",
                writes={target_file: cur.replace(f"{needle}\n", "")},
                author=w.pick(authors),
            )
    files, setup = repo.install()
    what = w.pick(("hash", "hash", "subject", "author"))
    out = f"{HOME}/{w.pick(('commit', 'culprit', 'found', 'origin', 'answer'))}.txt"
    what_text = {
        "hash": _f(w, "{its|the commit's} full {40-character |}{hash|commit hash|SHA}"),
        "subject": _f(w, "{its|the commit's} subject line{| (the first line of the message)}"),
        "author": _f(w, "the {name of its author|author's name} (name only, no email)"),
    }[what]
    gone = (
        " " + _f(w, "{(it has since been removed again)|(it is no longer in the current code)}")
        if removed
        else ""
    )
    task = w.phrase(
        "In the git repository {repo}, find the commit that first added the text `{needle}`{gone}. Write "
        "{what} to {out}.",
        "Which commit {introduced|first added} the string `{needle}` to {repo}{gone}? {Put|Write|Save} {what} in "
        "{out}.",
        "Ticket: we need to know where `{needle}` came from. {Search|Dig through} the history of {repo} "
        "for the commit that introduced it{gone} and write {what} to {out}.",
        "{Track down|Identify} the commit in which {someone|a teammate} first added `{needle}` to {repo}{gone}, "
        "and record {what} in {out}.",
        "{repo}: where did `{needle}` come from{gone}? {what} -> {out}.",
        "Someone added `{needle}` to the code in {repo} at some point{gone}, and we want to ask them about it. Search "
        "the history for the first commit that added it and write {what} to {out}.",
        repo=w.path_ref(repo_path),
        needle=needle,
        gone=gone,
        what=what_text,
        out=w.path_ref(out, "file"),
    )
    field = {"hash": "%H", "subject": "%s", "author": "%an"}[what]
    check = _check(
        repo_path,
        f"h=$({_by_subject(intro)})",
        '[ -n "$h" ] || exit 1',
        f"want=$(git log -1 --format='{field}' \"$h\")",
        f"got=$(sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' {quote(out)} | grep -v '^$')",
        '[ "$got" = "$want" ]',
    )
    q = quote(needle)
    find = w.pick(
        (
            f"git log -S{q} --format='{field}' --reverse | head -n 1 > {quote(out)}",
            f"git log -S {q} --format='{field}' | tail -n 1 > {quote(out)}",
        )
    )
    reference = [f"cd {quote(repo_path)}", f"git log -S {q} --oneline", find, f"cat {quote(out)}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if removed or mention else 2,
        files=files,
        setup=setup,
    )


@family(
    "git-changed-files-list", "git", "list the files a commit (or a range of commits) changed into a file"
)
def changed_files(w: World) -> Draft:
    repo_path = _repo_path(w)
    repo = _Repo(w, repo_path)
    _seed_files(w, repo, w.randint(4, 7))
    extra_dirs = ("src", "docs", "config", "tests", "scripts")
    for _ in range(w.randint(1, 4)):
        repo.touch()
    variant = w.pick(("last", "last", "subject", "range"))
    tag_a = tag_b = ""
    if variant == "range":
        major, minor = w.randint(0, 3), w.randint(1, 9)
        tag_a, tag_b = f"v{major}.{minor}.0", f"v{major}.{minor + 1}.0"
        w.note(tag_a, tag_b)
        repo.tag(tag_a, f"Release {tag_a[1:]}" if w.chance(0.5) else None)

    def change_set() -> tuple[dict[str, str], tuple[str, ...]]:
        tracked = sorted(repo.tree)
        k = w.randint(2, min(4, len(tracked)))
        chosen = w.sample(tracked, k)
        writes = {p: repo.tree[p] + repo.line() + "\n" for p in chosen}
        deletes: tuple[str, ...] = ()
        if w.chance(0.4):
            new = f"{w.pick(extra_dirs)}/{w.word()}.{w.pick(('py', 'md', 'ini', 'sh'))}"
            writes[new] = repo.line() + "\n"
        if w.chance(0.3) and len(tracked) > k + 1:
            deletes = (w.pick([p for p in tracked if p not in chosen]),)
        return writes, deletes

    expected: set[str] = set()
    subject = ""
    if variant == "range":
        snapshot = dict(repo.tree)
        for _ in range(w.randint(2, 4)):
            writes, deletes = change_set()
            repo.commit(writes=writes, deletes=deletes)
        # the net change between the tags (a file added and deleted inside the range is not listed by git)
        expected = {p for p in set(snapshot) | set(repo.tree) if snapshot.get(p) != repo.tree.get(p)}
        repo.tag(tag_b, f"Release {tag_b[1:]}" if w.chance(0.5) else None)
        for _ in range(w.randint(0, 2)):
            repo.touch()
    else:
        writes, deletes = change_set()
        expected = set(writes) | set(deletes)
        subject = repo.commit(writes=writes, deletes=deletes)
        if variant == "subject":
            for _ in range(w.randint(1, 3)):
                repo.touch()
    files, setup = repo.install()
    out = f"{HOME}/{w.pick(('changed', 'touched', 'files_changed', 'diff_files'))}.{w.pick(('txt', 'lst'))}"
    in_which = {
        "last": _f(w, "in the {last|most recent|latest} commit{| on the current branch}"),
        "subject": _f(w, "in the commit {whose subject is|titled} '{s}'", s=subject),
        "range": w.pick((f"between the tags {tag_a} and {tag_b}", f"from tag {tag_a} to tag {tag_b}")),
    }[variant]
    sorted_req = w.chance(0.4)
    fmt = _f(w, "one path per line{|, relative to the repository root}") + (
        _f(w, ", sorted{| alphabetically}") if sorted_req else ""
    )
    deleted_note = w.pick(("", " (deleted files count too)", " (include deleted files)"))
    task = w.phrase(
        "List the files changed {in_which} in {repo}{deleted} and {write|save} them to {out}, {fmt}.",
        "Which files were {changed|touched} {in_which} in {repo}{deleted}? {Put|Write} the paths in {out} ({fmt}).",
        "Ticket: {a reviewer|QA} wants {the list of files|every file} {touched|changed} {in_which} ({repo})"
        "{deleted}. {Save|Write} it to {out}, {fmt}.",
        "For {the changelog|a code review}, {write|produce} the paths of all files {modified|changed} {in_which} in "
        "{repo} to {out}{deleted}; {fmt}.",
        in_which=in_which,
        repo=w.path_ref(repo_path),
        out=w.path_ref(out, "file"),
        fmt=fmt,
        deleted=deleted_note,
    )
    want = "\n".join(sorted(expected)) + "\n"
    got = f"sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' {quote(out)} | grep -v '^$'"
    lines = [
        f"[ -f {quote(out)} ] || exit 1",
        f"want={quote(want)}",
        f'[ "$({got} | sort -u)" = "$(printf %s "$want" | sort -u)" ] || exit 1',
        f'[ "$({got} | wc -l)" -eq {len(expected)} ] || exit 1',
    ]
    if sorted_req:
        lines.append(f'[ "$({got})" = "$({got} | LC_ALL=C sort)" ] || [ "$({got})" = "$({got} | sort)" ]')
    check = "#!/bin/bash\n" + "\n".join(lines) + "\n"
    srt = " | sort" if sorted_req else ""
    if variant == "last":
        cmd = w.pick(
            (
                f"git show --name-only --format= HEAD{srt} > {quote(out)}",
                f"git diff --name-only HEAD~1 HEAD{srt} > {quote(out)}",
                f"git diff-tree --no-commit-id --name-only -r HEAD{srt} > {quote(out)}",
            )
        )
        look = "git log --stat -1"
    elif variant == "subject":
        look = f"git log --oneline --grep={quote('^' + subject + '$')}"
        cmd = (
            f"git show --name-only --format= $(git log --format=%h --grep={quote('^' + subject + '$')})"
            f"{srt} > {quote(out)}"
        )
    else:
        look = "git tag -l"
        cmd = f"git diff --name-only {tag_a} {tag_b}{srt} > {quote(out)}"
    reference = [f"cd {quote(repo_path)}", look, cmd, f"cat {quote(out)}"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if variant == "last" else 3,
        files=files,
        setup=setup,
    )


# ---- changing the repository ---------------------------------------------------------------------------------------
@family(
    "git-branch-commit", "git", "create a branch, commit one change on it and leave the main branch as it was"
)
def branch_commit(w: World) -> Draft:
    repo_path = _repo_path(w)
    main = w.pick(("main", "main", "master", "trunk"))
    repo = _Repo(w, repo_path, branch=main)
    paths = _seed_files(w, repo, w.randint(3, 5))
    for _ in range(w.randint(1, 4)):
        repo.touch()
    old_head = f"/root/.head-{w.token(6)}"
    repo.run(f"git rev-parse HEAD > {old_head}")
    branch = f"{w.pick(('feature', 'fix', 'topic', 'chore', 'docs'))}{w.pick(('/', '-'))}{w.word()}"
    create = w.chance(0.5)
    target = (
        f"{w.pick(('docs', 'notes', 'config', 'src'))}/{w.word()}.{w.pick(('md', 'txt', 'ini'))}"
        if create
        else w.pick(paths)
    )
    text = f"{w.pick(WORDS)} {w.pick(('enabled', 'pending', 'reviewed', 'v2', 'draft'))} {w.randint(1, 99)}"
    message = f"{w.pick(('Add', 'Record', 'Note', 'Mention'))} {w.pick(WORDS)} {w.pick(('setting', 'entry', 'step'))}"
    w.note(branch, target, text, message, main)
    decoy = w.pick(("untracked", "modified", "none"))
    decoy_file = ""
    if decoy == "untracked":
        decoy_file = w.pick(("scratch.txt", "notes.local", "tmp_output.log", "TODO.mine"))
        repo.run(f"echo 'do not commit' > {decoy_file}")
    elif decoy == "modified":
        decoy_file = w.pick([p for p in paths if p != target])
        repo.run(f"echo 'work in progress' >> {quote(decoy_file)}")
    back = w.chance(0.4)
    files, setup = repo.install()
    old = repo.tree.get(target, "")
    want = old + text + "\n"
    change = (
        _f(w, "{create|add} a file {t} containing the {single |}line '{x}'", t=target, x=text)
        if create
        else _f(w, "append the line '{x}' to {t}", t=target, x=text)
    )
    extra = (
        " "
        + w.spin(
            "{Commit only that file|Nothing else goes into the commit}: leave {d} {as it is|alone}.",
            d=decoy_file,
        )
        if decoy != "none"
        else ""
    )
    ret = " " + w.spin("{Afterwards|When done}, switch back to {m}.", m=main) if back else ""
    task = w.phrase(
        "In {repo}, create a branch {b} from {m}, {change} and commit it there with the message '{msg}'. {m} itself "
        "must not change.{extra}{ret}",
        "{Please |}start a new branch {b} in {repo} (based on {m}); on it, {change}, then commit "
        "with the message '{msg}'.{extra}{ret}",
        "Ticket: {repo} needs a branch {b} off {m} with one commit, message '{msg}', in which you {change}. Do not "
        "commit to {m}.{extra}{ret}",
        "Could you {make|open} a branch called {b} in {repo} from {m} and {record|commit} this change on it: "
        "{change}? Use '{msg}' as the commit message.{extra}{ret}",
        "{repo}: new branch {b} from {m}; {change}; commit '{msg}'; {m} unchanged.{extra}{ret}",
        "I don't want to touch {m} in {repo} yet. Put this on a fresh branch {b} (created from {m}) instead: {change}, "
        "committed as '{msg}'.{extra}{ret}",
        repo=w.path_ref(repo_path),
        b=branch,
        m=main,
        change=change,
        msg=message,
        extra=extra,
        ret=ret,
    )
    lines = [
        f"base=$(cat {old_head})",
        f'[ "$(git rev-parse -q --verify refs/heads/{main})" = "$base" ] || exit 1',
        f"tip=$(git rev-parse -q --verify refs/heads/{branch}) || exit 1",
        '[ "$(git rev-parse "$tip^")" = "$base" ] || exit 1',
        f'[ "$(git log -1 --format=%s "$tip")" = {quote(message)} ] || exit 1',
        f'[ "$(git diff --name-only "$base" "$tip")" = {quote(target)} ] || exit 1',
        f"diff <(git show \"$tip\":{quote(target)} | sed 's/[[:space:]]*$//') "
        f"<(printf %s {quote(want)} | sed 's/[[:space:]]*$//') >/dev/null || exit 1",
    ]
    if back:
        lines.append(f'[ "$(git symbolic-ref --short HEAD)" = {main} ] || exit 1')
    check = _check(repo_path, *lines)
    make = w.pick(
        (
            f"git switch -c {branch}",
            f"git checkout -b {branch}",
            f"git branch {branch} && git switch {branch}",
        )
    )
    folder = posixpath.dirname(target)
    edit = (
        f"mkdir -p {folder} && echo {quote(text)} > {target}"
        if create
        else f"echo {quote(text)} >> {quote(target)}"
    )
    reference = [
        f"cd {quote(repo_path)}",
        "git status --short",
        make,
        edit,
        f"git add {quote(target)} && git commit -m {quote(message)}",
    ]
    if back:
        reference.append(f"git switch {main}" if w.chance(0.5) else f"git checkout {main}")
    reference.append(f"git log --oneline -3 {branch}")
    return Draft(task=task, check=check, reference=reference, difficulty=3, files=files, setup=setup)


@family(
    "git-revert-commit", "git", "undo one earlier commit with a new commit, keeping history and later work"
)
def revert_commit(w: World) -> Draft:
    repo_path = _repo_path(w)
    repo = _Repo(w, repo_path)
    _seed_files(w, repo, w.randint(3, 6))
    if "config/settings.ini" not in repo.tree:
        repo.commit("Add settings", writes={"config/settings.ini": "[app]\ndebug = false\nworkers = 4\n"})
    for _ in range(w.randint(1, 3)):
        repo.touch()
    bad_file = w.pick(sorted(repo.tree))
    before = repo.tree[bad_file]
    kind = w.pick(("line", "flag"))
    if kind == "flag" and bad_file == "config/settings.ini" and "debug = false" in before:
        after = before.replace("debug = false", "debug = true")
        bad = f"Turn on debug{w.pick(('', ' logging', ' mode'))}"
    else:
        after = before + f"{w.pick(WORDS)}_{w.pick(('hack', 'override', 'bypass', 'workaround'))} = true\n"
        bad = f"{w.pick(('Quick', 'Temporary', 'Experimental'))} {w.pick(_NOUNS)} {w.pick(('hack', 'override'))}"
    w.note(bad)
    repo.commit(bad, writes={bad_file: after}, author=_person(w))
    later = w.randint(0, 3)
    for _ in range(later):
        repo.touch(w.pick([p for p in repo.tree if p != bad_file]))
    old_head = f"/root/.head-{w.token(6)}"
    repo.run(f"git rev-parse HEAD > {old_head}")
    files, setup = repo.install()
    ident = w.pick(("subject", "subject", "last") if later == 0 else ("subject",))
    which = (
        _f(w, "the commit '{s}'", s=bad)
        if ident == "subject"
        else _f(w, "the {last|latest|most recent} commit ('{s}')", s=bad)
    )
    keep = w.spin(
        "{Do not rewrite history|History must not be rewritten} (no reset or rebase): "
        "{undo it with a new commit|add a commit that reverses it}"
    )
    later_text = _f(w, "; the commits made after it stay") if later else ""
    task = w.phrase(
        "{Revert|Undo} {which} in {repo}. {keep}{later}.",
        "{which} in {repo} broke things. {keep}{later}.",
        "Ticket: {which} in {repo} has to be {backed out|reverted}. {keep}{later}.",
        "Can you {back out|revert} {which} in {repo}? {keep}{later}.",
        "{repo}: revert {which}. {keep}{later}.",
        "hey, {which} in {repo} needs to go away again - can you undo it? {keep}{later}.",
        which=which,
        repo=w.path_ref(repo_path),
        keep=keep,
        later=later_text,
    )
    check = _check(
        repo_path,
        f"old=$(cat {old_head})",
        'git merge-base --is-ancestor "$old" HEAD || exit 1',
        '[ "$(git rev-parse HEAD)" != "$old" ] || exit 1',
        f"diff <(git show HEAD:{quote(bad_file)}) <(printf %s {quote(before)}) >/dev/null || exit 1",
        f"git diff --quiet \"$old\" HEAD -- . ':(exclude){bad_file}' || exit 1",
        '[ -z "$(git status --porcelain --untracked-files=no)" ] || exit 1',
    )
    grep = quote("^" + bad + "$")
    pick = w.pick(
        (
            f"git revert --no-edit $(git log --format=%H --grep={grep})",
            f"git revert --no-edit $(git log --format=%h -1 --grep={grep})",
        )
    )
    if ident == "last" and w.chance(0.5):
        pick = "git revert --no-edit HEAD"
    rev = pick.split("--no-edit ", 1)[1]
    undo = f"Revert {bad!r}".replace("'", '"')
    steps = w.pick(
        (
            [pick],
            [pick],
            [f"h={rev}", 'git revert --no-edit "$h"'],
            [f"git revert -n {rev}", f"git commit -m {quote(undo)}"],
            [f"git revert --no-commit {rev}", "git status --short", f"git commit -q -m {quote(undo)}"],
            [f"GIT_EDITOR=true git revert {rev}"],
            [f"git revert --no-edit -s {rev}"],
            [f"git show {rev} | git apply -R", f"git commit -a -m {quote(undo)}"],
            [f"git diff {rev} {rev}^ | git apply", f"git commit -q -am {quote(undo)}"],
        )
    )
    reference = [f"cd {quote(repo_path)}", "git log --oneline", *steps, "git log --oneline -3"]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if ident == "last" else 3,
        files=files,
        setup=setup,
    )


@family(
    "git-tag-release", "git", "tag a release commit (annotated or lightweight), leaving existing tags alone"
)
def tag_release(w: World) -> Draft:
    repo_path = _repo_path(w)
    repo = _Repo(w, repo_path)
    _seed_files(w, repo, w.randint(2, 5))
    major, minor = w.randint(0, 4), w.randint(0, 8)
    old_v = f"{major}.{minor}.{w.randint(0, 3)}"
    new_v = f"{major}.{minor + 1}.0"
    repo.commit(f"Bump version to {old_v}", writes={"VERSION": old_v + "\n"})
    repo.tag(f"v{old_v}", f"Release {old_v}" if w.chance(0.5) else None)
    for _ in range(w.randint(1, 3)):
        repo.touch()
    target = repo.commit(f"Bump version to {new_v}", writes={"VERSION": new_v + "\n"})
    after = w.randint(0, 3)
    for _ in range(after):
        repo.touch(w.pick([p for p in repo.tree if p != "VERSION"]))
    files, setup = repo.install()
    tag = w.pick((f"v{new_v}", f"v{new_v}", f"release-{new_v}"))
    annotated = w.chance(0.6)
    message = w.pick(
        (f"Release {new_v}", f"Version {new_v}", f"{w.pick(WORDS).capitalize()} release {new_v}")
    )
    w.note(old_v, new_v, tag, message)
    if after == 0:
        where = _f(w, "{on|at} the {latest|current|most recent} commit ('{s}')", s=target)
    else:
        where = w.pick(
            (
                _f(
                    w, "on the commit '{s}' ({it is not the latest|newer commits sit on top of it})", s=target
                ),
                _f(
                    w,
                    "on the commit where VERSION was {changed|bumped} to {v} (not the newest commit)",
                    v=new_v,
                ),
            )
        )
    kind = (
        _f(w, "an annotated tag {t} with the message '{m}'", t=tag, m=message)
        if annotated
        else _f(w, "a lightweight tag {t}", t=tag)
    )
    task = w.phrase(
        "In {repo}, create {kind} {where}. {Keep|Leave} the existing v{old} tag {as it is|untouched}.",
        "{Please |}tag the {release|new version} in {repo}: {kind}, {where}.",
        "Ticket: release {new} is {ready|out}. Put {kind} {where} in {repo}{| and leave the other tags alone}.",
        "Could you mark {new} in {repo}? I need {kind} {where}.",
        "{repo}: {kind}, {where}; v{old} stays.",
        "We are shipping {new} from {repo} and the tag is still missing. Please add {kind} {where}, leaving the older "
        "tags as they are.",
        repo=w.path_ref(repo_path),
        kind=kind,
        where=where,
        old=old_v,
        new=new_v,
    )
    lines = [
        f"want=$({_by_subject(target)})",
        '[ -n "$want" ] || exit 1',
        f'[ "$(git rev-parse -q --verify \'refs/tags/{tag}^{{commit}}\')" = "$want" ] || exit 1',
        f"[ \"$(git rev-parse -q --verify 'refs/tags/v{old_v}^{{commit}}')\" = "
        f'"$({_by_subject(f"Bump version to {old_v}")})" ] || exit 1',
    ]
    if annotated:
        lines += [
            f'[ "$(git cat-file -t refs/tags/{tag})" = tag ] || exit 1',
            f"[ \"$(git for-each-ref --format='%(contents:subject)' refs/tags/{tag})\" = {quote(message)} ]",
        ]
    else:
        lines.append(f'[ "$(git cat-file -t refs/tags/{tag})" = commit ]')
    check = _check(repo_path, *lines)
    rev = "" if after == 0 else f" $(git log --format=%h --grep={quote('^' + target + '$')})"
    if after and w.chance(0.5):
        rev = " $(git log --format=%h -1 -- VERSION)"
    cmd = f"git tag -a {tag} -m {quote(message)}{rev}" if annotated else f"git tag {tag}{rev}"
    how = w.pick(("porcelain", "porcelain", "plumbing", "file"))
    at = '"$(git rev-parse HEAD)"' if not rev else f'"$(git rev-parse{rev})"'
    if how == "plumbing" and annotated:  # the tag object written by mktag, its ref by update-ref
        obj = (
            f"printf 'object %s\\ntype commit\\ntag %s\\ntagger %s\\n\\n%s\\n' {at} {tag} "
            f'"$(git var GIT_COMMITTER_IDENT)" {quote(message)} | git mktag'
        )
        cmd = f'git update-ref refs/tags/{tag} "$({obj})"'
    elif how == "plumbing":  # a lightweight tag is only a ref
        cmd = f"git update-ref refs/tags/{tag}{rev or ' HEAD'}"
    elif how == "file" and annotated:  # the message written to a file first
        cmd = (
            f"printf '%s\\n' {quote(message)} > /tmp/tag-message && git tag -a {tag} -F /tmp/tag-message{rev}"
        )
    reference = [
        f"cd {quote(repo_path)}",
        w.pick(("git log --oneline --decorate", "git tag -l && git log --oneline")),
        cmd,
        w.pick((f"git show --no-patch {tag}", f"git log --oneline --decorate -3 {tag}")),
    ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if after == 0 else 3,
        files=files,
        setup=setup,
    )


@family("git-restore-file", "git", "bring back a deleted file, or a file's older version, from history")
def restore_file(w: World) -> Draft:
    repo_path = _repo_path(w)
    repo = _Repo(w, repo_path)
    paths = _seed_files(w, repo, w.randint(3, 6))
    target = w.pick(paths)
    variant = w.pick(("deleted", "deleted", "at_tag"))
    commit_it = w.chance(0.4)
    tag = ""
    for _ in range(w.randint(1, 3)):
        repo.touch(target)
    if variant == "at_tag":
        tag = f"v{w.randint(0, 3)}.{w.randint(0, 9)}.{w.randint(0, 5)}"
        w.note(tag)
        repo.tag(tag, f"Release {tag[1:]}" if w.chance(0.5) else None)
    expected = repo.tree[target]
    for _ in range(w.randint(1, 2)):
        repo.touch(target if variant == "deleted" else None)
        if variant == "deleted":
            expected = repo.tree[target]
    also_gone = ""
    if variant == "deleted":
        others = [p for p in repo.tree if p != target]
        deletes: tuple[str, ...] = (target,)
        if w.chance(0.5) and len(others) > 1:
            also_gone = w.pick(others)
            deletes = (target, also_gone)
        repo.commit(f"Remove {w.pick(('unused', 'obsolete', 'old'))} files", deletes=deletes)
    else:
        for _ in range(w.randint(1, 3)):
            repo.touch(target)
    for _ in range(w.randint(0, 2)):
        repo.touch(w.pick([p for p in repo.tree if p != target]))
    old_head = f"/root/.head-{w.token(6)}"
    repo.run(f"git rev-parse HEAD > {old_head}")
    files, setup = repo.install()
    message = f"Restore {posixpath.basename(target)}" if w.chance(0.5) else f"Bring back {target}"
    w.note(target, message)
    if variant == "deleted":
        what = _f(
            w,
            "{t} was deleted in an earlier commit{| by mistake}. {Bring it back|Restore it} with the "
            "content it had just before it was deleted",
            t=target,
        )
        only = " " + _f(w, "(only that file: {a} stays deleted)", a=also_gone) if also_gone else ""
    else:
        what = _f(
            w,
            "{t} {has been changed since|was edited after} the {tag} release. Put it back {to|into} "
            "{exactly |}the state it had at tag {tag}",
            t=target,
            tag=tag,
        )
        only = ""
    end = (
        _f(w, ", then commit {that|the restored file} with the message '{m}'", m=message)
        if commit_it
        else "; " + _f(w, "{a commit is not needed|no commit is needed|leaving it uncommitted is fine}")
    )
    task = w.phrase(
        "In {repo}: {what}{end}{only}.",
        "{Please |}{fix|sort out} {repo}: {what}{end}{only}.",
        "Ticket: in {repo}, {what}{end}{only}.",
        "Could you help with {repo}? {what}{end}{only}.",
        "{repo}: {what}{end}{only}.",
        "A file in {repo} needs to come back from history. Here is the situation: {what}{end}{only}.",
        repo=w.path_ref(repo_path),
        what=what,
        end=end,
        only=only,
    )
    want = quote(expected)
    lines = [f"old=$(cat {old_head})"]
    if commit_it:
        lines += [
            '[ "$(git rev-parse HEAD^)" = "$old" ] || exit 1',
            f'[ "$(git log -1 --format=%s)" = {quote(message)} ] || exit 1',
            f'[ "$(git diff --name-only "$old" HEAD)" = {quote(target)} ] || exit 1',
            f"diff <(git show HEAD:{quote(target)}) <(printf %s {want}) >/dev/null || exit 1",
        ]
    lines.append(f"diff {quote(target)} <(printf %s {want}) >/dev/null || exit 1")
    if also_gone:
        lines.append(f"[ ! -e {quote(also_gone)} ] || exit 1")
    check = _check(repo_path, *lines)
    if variant == "deleted":
        find = w.pick(
            (
                f"git log --oneline --diff-filter=D -- {quote(target)}",
                f"git rev-list -n 1 HEAD -- {quote(target)}",
            )
        )
        src = f"$(git rev-list -n 1 HEAD -- {quote(target)})^"
    else:
        find, src = "git tag -l", tag
    parent = posixpath.dirname(target)
    restore = w.pick(
        (
            f"git checkout {src} -- {quote(target)}",
            f"git restore --source={src} -- {quote(target)}",
            # the blob printed by git show, written back by the shell
            (f"mkdir -p {quote(parent)} && " if parent else "")
            + f'git show "{src}:{target}" > {quote(target)}',
        )
    )
    reference = [f"cd {quote(repo_path)}", find, restore]
    if commit_it:
        reference.append(f"git add {quote(target)} && git commit -m {quote(message)}")
    reference.append(f"cat {quote(target)}")
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=3 if variant == "deleted" else 2,
        files=files,
        setup=setup,
    )


@family(
    "git-amend-last-commit",
    "git",
    "fix the last commit (its message, or a forgotten file) without a new commit",
)
def amend_last(w: World) -> Draft:
    repo_path = _repo_path(w)
    repo = _Repo(w, repo_path)
    paths = _seed_files(w, repo, w.randint(3, 5))
    for _ in range(w.randint(1, 3)):
        repo.touch()
    variant = w.pick(("message", "message", "forgotten"))
    good = (
        f"{w.pick(_VERBS)} {w.pick(('pagination', 'validation', 'authentication', 'configuration', 'migration'))}"
        f" {w.pick(('for', 'in'))} {w.pick(SERVICES)}"
    )
    word = good.split()[1]
    i = w.randint(2, len(word) - 2)
    typo = good.replace(word, word[:i] + word[i + 1 :], 1) if variant == "message" else good
    w.note(good, typo)
    rel = w.pick(paths)
    repo.commit(typo, writes={rel: repo.tree[rel] + repo.line() + "\n"})
    meta = f"/root/.amend-{w.token(6)}"
    repo.run(f"git rev-parse HEAD^ > {meta}.parent && git rev-parse 'HEAD^{{tree}}' > {meta}.tree")
    forgot = ""
    if variant == "forgotten":
        forgot = f"{w.pick(('docs', 'tests', 'src'))}/{w.word()}.{w.pick(('md', 'py', 'txt'))}"
        w.note(forgot)
        repo.run(f"mkdir -p {posixpath.dirname(forgot)} && echo {quote(repo.line())} > {quote(forgot)}")
        if w.chance(0.5):
            repo.run("echo 'scratch' > local-notes.txt")
    files, setup = repo.install()
    if variant == "message":
        ask = _f(
            w,
            "the {last|latest|most recent} commit's message has a typo ('{t}'); it should read exactly '{g}'",
            t=typo,
            g=good,
        )
        keep = _f(w, "{without changing what the commit contains|but keep the commit's content as it is}")
    else:
        ask = _f(
            w,
            "the {new |}file {f} was {forgotten in|left out of} the {last|latest} commit{|, where it belongs}",
            f=forgot,
        )
        keep = _f(w, "{and keep its message|keeping the message} '{g}'", g=good)
    nopush = _f(w, "{there must be no extra commit|do not add a new commit on top}")
    task = w.phrase(
        "In {repo}, {ask}. Fix that {keep}. {nopush_c}.",
        "{Please |}amend the last commit in {repo}: {ask}. {Fix|Correct} it {keep}; {nopush}.",
        "Ticket: in {repo}, {ask}. {nopush_c}. Fix it {keep}.",
        "{Oops|Whoops}: in {repo}, {ask}. Could you {amend|fix} it {keep}? {nopush_c}.",
        "{repo}: {ask}. Amend it {keep}; {nopush}.",
        "Before I push {repo}, the last commit needs a fix: {ask}. Please correct it {keep} - {nopush}.",
        repo=w.path_ref(repo_path),
        ask=ask,
        keep=keep,
        nopush=nopush,
        nopush_c=_cap(nopush),
    )
    lines = [
        f'[ "$(git rev-parse HEAD^)" = "$(cat {meta}.parent)" ] || exit 1',
        f'[ "$(git log -1 --format=%s)" = {quote(good)} ] || exit 1',
    ]
    if variant == "message":
        lines.append(f'[ "$(git rev-parse \'HEAD^{{tree}}\')" = "$(cat {meta}.tree)" ] || exit 1')
    else:
        lines += [
            f"git cat-file -e HEAD:{quote(forgot)} 2>/dev/null || exit 1",
            f'[ "$(git diff --name-only "$(cat {meta}.tree)" \'HEAD^{{tree}}\')" = {quote(forgot)} ] || exit 1',
            "! git cat-file -e HEAD:local-notes.txt 2>/dev/null || exit 1",
        ]
    check = _check(repo_path, *lines)
    how = w.pick(("amend", "amend", "reset", "plumbing"))
    staged = [] if variant == "message" else [f"git add {quote(forgot)}"]
    if how == "reset":  # the last commit undone (its changes kept staged), then made again
        again = w.pick((f"git commit -m {quote(good)}", "git commit -C ORIG_HEAD"))
        steps = [
            *staged,
            "git reset --soft HEAD~1",
            again if variant == "forgotten" else f"git commit -m {quote(good)}",
        ]
    elif (
        how == "plumbing"
    ):  # a replacement commit built with commit-tree on the same parent, the branch moved to it
        tree = "'HEAD^{tree}'" if variant == "message" else '"$(git write-tree)"'
        new_commit = f'"$(git commit-tree {tree} -p HEAD^ -m {quote(good)})"'
        move = w.pick((f"git reset --soft {new_commit}", f"git update-ref HEAD {new_commit}"))
        steps = [*staged, move]
    elif variant == "message":
        steps = [f"git commit --amend -m {quote(good)}"]
    else:
        steps = [
            *staged,
            w.pick(("git commit --amend --no-edit", f"git commit --amend -m {quote(good)}")),
        ]
    reference = [
        f"cd {quote(repo_path)}",
        w.pick(("git log --oneline -3", "git show --stat HEAD")),
        *steps,
        "git log --stat -1",
    ]
    return Draft(
        task=task,
        check=check,
        reference=reference,
        difficulty=2 if variant == "message" else 3,
        files=files,
        setup=setup,
    )


# ---- workflows: conflicts, cherry-picks, stashes, squashes -----------------------------------------------------------
def _git_where(w: World, repo_path: str) -> tuple[str | None, str]:
    """Where the shell starts (the repository itself, its parent or home) and how the task names the repository."""
    wd = w.pick((None, repo_path, repo_path, posixpath.dirname(repo_path)))
    if wd == HOME:
        wd = None
    if wd == repo_path:
        return wd, w.pick(
            ("the repository you are in", "this repository", "the current repository", w.path_ref(repo_path))
        )
    return wd, w.path_ref(repo_path)


def _cd(w: World, repo_path: str, wd: str | None) -> list[str]:
    if wd == repo_path:
        return [w.pick(("git status --short", "git branch -a", "pwd"))]
    return [f"cd {quote(repo_path)}"]


def _setting_file(w: World, n: int) -> str:
    return "".join(
        f"{w.pick(WORDS)}_{w.pick(('limit', 'mode', 'name', 'path', 'flag'))} = {w.randint(1, 999)}\n"
        for _ in range(n)
    )


@family(
    "git-resolve-conflict",
    "git",
    "merge a branch whose changes conflict and resolve each conflicted file by keeping the side asked for",
)
def resolve_conflict(w: World) -> Draft:
    repo_path = _repo_path(w)
    main = w.pick(("main", "main", "master", "develop"))
    repo = _Repo(w, repo_path, branch=main)
    pool = [
        "config/app.ini",
        "VERSION",
        "docs/setup.md",
        f"src/{w.pick(SERVICES)}.py",
        "Makefile",
        f"lib/{w.pick(WORDS)}.js",
        "settings.toml",
    ]
    k = w.randint(2, 3)
    conflicted = w.sample(pool, k)
    clean = w.pick([p for p in pool if p not in conflicted])
    base = {p: _setting_file(w, 3) for p in [*conflicted, clean]}
    repo.commit("Initial commit", writes=base)
    repo.touch(clean)
    feature = f"{w.pick(('feature', 'topic', 'release', 'hotfix'))}/{w.word()}"
    w.note(feature, *conflicted, clean)
    ours, theirs = {}, {}
    for p in conflicted:
        lines = base[p].splitlines(keepends=True)
        i = w.randint(0, len(lines) - 1)
        key = lines[i].split(" = ")[0]
        a, b = w.sample(range(1000, 9999), 2)
        ours[p] = "".join(lines[:i] + [f"{key} = {a}\n"] + lines[i + 1 :])
        theirs[p] = "".join(lines[:i] + [f"{key} = {b}\n"] + lines[i + 1 :])
    repo.branch_off(feature)
    repo.commit(writes={p: theirs[p] for p in conflicted})
    clean_new = repo.tree[clean] + repo.line() + "\n"
    repo.commit(writes={clean: clean_new})
    repo.switch(main)
    repo.commit(writes={p: ours[p] for p in conflicted})
    meta = f"/root/.merge-{w.token(6)}"
    repo.run(f"git rev-parse {main} > {meta}.main && git rev-parse {quote(feature)} > {meta}.feat")
    files, setup = repo.install()
    keep_ours = w.sample(conflicted, w.randint(1, k - 1))
    keep_theirs = [p for p in conflicted if p not in keep_ours]
    want = {p: (ours[p] if p in keep_ours else theirs[p]) for p in conflicted}
    msg = w.pick(("", "", f"Merge {feature} into {main}", f"Merge branch '{feature}'"))
    w.note(msg)
    sides = w.clauses(
        [
            _f(w, "{o}: keep {our} version", o=p, our=w.pick((f"the {main}", "our", f"{main}'s")))
            for p in keep_ours
        ]
        + [_f(w, "{o}: take the version from {f}", o=p, f=feature) for p in keep_theirs]
    )
    commit = (
        _f(w, "commit the merge with the message '{m}'", m=msg)
        if msg
        else _f(w, "{finish|conclude} the merge with a merge commit{| (the default message is fine)}")
    )
    wd, repo_ref = _git_where(w, repo_path)
    task = w.phrase(
        "In {repo}, merge {feature} into {main}. It conflicts; resolve it like this: {sides}. Then {commit}.",
        "Ticket: {feature} has to land on {main} in {repo}. The merge {conflicts|stops with conflicts}. "
        "Resolution agreed with the team: {sides}. {commit_c}.",
        "hey, can you merge {feature} into {main} in {repo}? there will be conflicts: {sides}. {commit_c}, please.",
        "Merge {feature} -> {main} ({repo}); conflicts: {sides}; {commit}.",
        "Why is {feature} still not in {main}? Its merge in {repo} conflicts. Do the merge, settling the conflicted "
        "files as follows: {sides}. {commit_c}; other changes from {feature} come in as they are.",
        "I want {main} in {repo} to contain everything from {feature}. The two branches changed the same lines, so "
        "git will ask: {sides}. Keep every other change the merge brings, and {commit}. Do not rebase anything.",
        repo=repo_ref,
        feature=feature,
        main=main,
        sides=sides,
        commit=commit,
        commit_c=_cap(commit),
    )
    lines = [
        f'[ "$(git symbolic-ref -q HEAD)" = refs/heads/{main} ] || exit 1',
        f'[ "$(git rev-parse HEAD^1)" = "$(cat {meta}.main)" ] || exit 1',
        f'[ "$(git rev-parse HEAD^2)" = "$(cat {meta}.feat)" ] || exit 1',
        '[ -z "$(git status --porcelain --untracked-files=no)" ] || exit 1',
        f"diff <(git show HEAD:{quote(clean)}) <(printf %s {quote(clean_new)}) >/dev/null || exit 1",
    ]
    for p, text in want.items():
        lines.append(f"diff <(git show HEAD:{quote(p)}) <(printf %s {quote(text)}) >/dev/null || exit 1")
    if msg:
        lines.append(f'[ "$(git log -1 --format=%s)" = {quote(msg)} ] || exit 1')
    check = _check(repo_path, *lines)
    ref = [
        *_cd(w, repo_path, wd),
        f"git merge {quote(feature)}" if w.chance(0.7) else f"git merge --no-ff {quote(feature)}",
    ]
    style = w.pick(("checkout", "restore", "show", "mixed"))
    for p in keep_ours:
        s = style if style != "mixed" else w.pick(("checkout", "restore", "show"))
        ref.append(
            {
                "checkout": f"git checkout --ours -- {quote(p)}",
                "restore": f"git restore --ours {quote(p)}",
                "show": f"git show HEAD:{quote(p)} > {quote(p)}",
            }[s]
        )
    for p in keep_theirs:
        s = style if style != "mixed" else w.pick(("checkout", "restore", "show"))
        ref.append(
            {
                "checkout": w.pick(
                    (f"git checkout --theirs -- {quote(p)}", f"git checkout {quote(feature)} -- {quote(p)}")
                ),
                "restore": f"git restore --theirs {quote(p)}",
                "show": w.pick(
                    (
                        f"git show MERGE_HEAD:{quote(p)} > {quote(p)}",
                        f"git show {quote(feature)}:{quote(p)} > {quote(p)}",
                    )
                ),
            }[s]
        )
    ref.append(w.pick(("git add " + " ".join(quote(p) for p in conflicted), "git add -A", "git add -u")))
    if msg:
        ref.append(w.pick((f"git commit -m {quote(msg)}", f"git commit -q -m {quote(msg)}")))
    else:
        ref.append(
            w.pick(
                ("git commit --no-edit", "GIT_EDITOR=true git merge --continue", "git commit -q --no-edit")
            )
        )
    ref.append(w.pick(("git log --oneline --graph -5", "git show --stat HEAD")))
    return Draft(task=task, check=check, reference=ref, difficulty=3, files=files, setup=setup, workdir=wd)


@family("git-cherry-pick", "git", "copy one named commit from another branch onto a branch with cherry-pick")
def cherry_pick(w: World) -> Draft:
    repo_path = _repo_path(w)
    main = w.pick(("main", "main", "master"))
    repo = _Repo(w, repo_path, branch=main)
    paths = _seed_files(w, repo, w.randint(3, 5))
    for _ in range(w.randint(1, 2)):
        repo.touch()
    target = w.pick(
        (
            f"release/{w.randint(1, 4)}.{w.randint(0, 9)}",
            f"stable-{w.word()}",
            "production",
            f"maint/{w.word()}",
        )
    )
    repo.branch_off(target)
    for _ in range(w.randint(0, 2)):
        repo.touch()
    repo.switch(main)
    source = w.pick((main, f"feature/{w.word()}", f"dev-{w.word()}"))
    if source != main:
        repo.branch_off(source)
    n = w.randint(3, 5)
    idx = w.randint(0, n - 1)
    picked = ""
    picked_file = ""
    for i in range(n):
        if i == idx:
            new = f"{w.pick(('tests', 'docs', 'src'))}/{w.word()}.{w.pick(('py', 'md', 'txt'))}"
            picked = f"Fix {w.pick(_NOUNS)} {w.pick(('crash', 'regression', 'off-by-one', 'typo', 'leak'))}"
            picked_file = new
            repo.commit(picked, writes={new: repo.line() + "\n"})
        else:
            repo.touch(w.pick(paths))
    repo.switch(w.pick((main, source)) if source != main else main)
    start_branch = repo.branch
    meta = f"/root/.pick-{w.token(6)}"
    repo.run(
        f"git rev-parse {quote(target)} > {meta}.target && git rev-parse {quote(source)} > {meta}.source "
        f"&& git rev-parse {main} > {meta}.main"
    )
    files, setup = repo.install()
    w.note(target, source, picked, picked_file)
    wd, repo_ref = _git_where(w, repo_path)
    stay = w.chance(0.3)
    back = _f(w, " and {switch|go} back to {b} afterwards", b=start_branch) if stay else ""
    task = w.phrase(
        "In {repo}, apply the commit '{s}' from {src} to the {t} branch{back}. Only that commit: nothing else from "
        "{src} may reach {t}.",
        "Ticket: the fix '{s}' ({src}) is needed on {t} too. {Cherry-pick|Backport} it in {repo}{back}; "
        "{src} itself stays as it is.",
        "can you backport '{s}' onto {t}? repo is {repo}, the commit sits on {src}{back}.",
        "Cherry-pick '{s}' ({src}) -> {t}, repository {repo}{back}.",
        "Which branch has '{s}'? Only {src}, and {t} needs it as well. Bring that one commit over in {repo}{back}, "
        "without merging {src}.",
        "Our {t} branch in {repo} is missing the change made by the commit '{s}' on {src}. Copy exactly that "
        "commit onto the tip of {t} as one new commit (same change, same subject){back}. Do not rewrite {src} or "
        "{t}'s existing history.",
        repo=repo_ref,
        s=picked,
        src=source,
        t=target,
        back=back,
    )
    lines = [
        f"pick=$({_by_subject(picked, quote(source))})",
        f'[ "$(git rev-parse {quote(target)}^)" = "$(cat {meta}.target)" ] || exit 1',
        f'[ "$(git log -1 --format=%s {quote(target)})" = {quote(picked)} ] || exit 1',
        f'[ "$(git diff --name-only {quote(target)}^ {quote(target)})" = {quote(picked_file)} ] || exit 1',
        f'[ "$(git show "$pick" | git patch-id --stable | cut -d" " -f1)" = '
        f'"$(git show {quote(target)} | git patch-id --stable | cut -d" " -f1)" ] || exit 1',
        f'[ "$(git rev-parse {quote(source)})" = "$(cat {meta}.source)" ] || exit 1',
        f'[ "$(git rev-parse {main})" = "$(cat {meta}.main)" ] || exit 1',
        '[ -z "$(git status --porcelain --untracked-files=no)" ] || exit 1',
    ]
    if stay:
        lines.append(f'[ "$(git symbolic-ref -q HEAD)" = refs/heads/{start_branch} ] || exit 1')
    check = _check(repo_path, *lines)
    grep = quote("^" + picked + "$")
    find = w.pick(
        (
            f"h=$(git log {quote(source)} --format=%H --grep={grep})",
            f"h=$(git log {quote(source)} --format=%h -1 --fixed-strings --grep={quote(picked)})",
            f"h=$(git rev-parse {quote(':/' + picked)})",
        )
    )
    go = w.pick(
        (f"git switch {quote(target)}", f"git checkout {quote(target)}", f"git checkout -q {quote(target)}")
    )
    how = w.pick(("pick", "pick", "x", "am", "apply"))
    apply = {
        "pick": 'git cherry-pick "$h"',
        "x": 'git cherry-pick -x "$h"',
        "am": 'git format-patch -1 --stdout "$h" | git am -q',
        "apply": 'git show "$h" | git apply --index && git commit -q -C "$h"',
    }[how]
    ref = [
        *_cd(w, repo_path, wd),
        w.pick((f"git log --oneline {quote(source)} -8", "git branch -a")),
        find,
        go,
        apply,
    ]
    if stay:
        ref.append(w.pick((f"git switch {start_branch}", f"git checkout {start_branch}", "git switch -")))
    ref.append(f"git log --oneline -3 {quote(target)}")
    return Draft(task=task, check=check, reference=ref, difficulty=3, files=files, setup=setup, workdir=wd)


@family(
    "git-stash-switch",
    "git",
    "set uncommitted work aside (stash), switch to the branch it belongs on and re-apply it there",
)
def stash_switch(w: World) -> Draft:
    repo_path = _repo_path(w)
    main = w.pick(("main", "main", "master"))
    repo = _Repo(w, repo_path, branch=main)
    paths = _seed_files(w, repo, w.randint(3, 5))
    rel = w.pick(paths)
    body = _setting_file(w, 5)
    repo.commit(writes={rel: body})
    branch = f"{w.pick(('feature', 'fix', 'wip', 'topic'))}{w.pick(('/', '-'))}{w.word()}"
    repo.branch_off(branch)
    lines = body.splitlines(keepends=True)
    first = f"{lines[0].split(' = ')[0]} = {w.randint(1000, 9999)}\n"
    on_branch = "".join([first, *lines[1:]])
    repo.commit(writes={rel: on_branch})
    repo.switch(main)
    for _ in range(w.randint(0, 2)):
        repo.touch(w.pick([p for p in paths if p != rel]))
    wip_line = f"{w.pick(WORDS)}_{w.pick(('retries', 'budget', 'window'))} = {w.randint(1, 99)}\n"
    want = on_branch + wip_line
    extra = ""
    if w.chance(0.4):
        extra = f"notes/{w.word()}.md"
        repo.run(f"mkdir -p notes && echo {quote('- ' + w.pick(WORDS))} > {quote(extra)}")
    repo.run(f"printf %s {quote(wip_line)} >> {quote(rel)}")
    meta = f"/root/.stash-{w.token(6)}"
    repo.run(f"git rev-parse {main} > {meta}.main && git rev-parse {quote(branch)} > {meta}.branch")
    files, setup = repo.install()
    commit_msg = w.pick(("", "", f"Add {wip_line.split(' = ')[0]} setting", f"WIP: {w.pick(_NOUNS)}"))
    w.note(branch, rel, commit_msg, extra)
    wd, repo_ref = _git_where(w, repo_path)
    end = (
        _f(w, "then commit it there with the message '{m}'", m=commit_msg)
        if commit_msg
        else _f(w, "{leave it uncommitted there|do not commit it yet}")
    )
    also = _f(w, " (together with the new file {e})", e=extra) if extra else ""
    task = w.phrase(
        "In {repo} I started editing {f}{also} on {main}, but that work belongs on {b}. Move the uncommitted "
        "changes over to {b} and {end}. {main} must stay as it is and nothing may be left in the stash.",
        "Ticket: uncommitted changes to {f}{also} in {repo} were made on the wrong branch ({main}). Stash them, "
        "switch to {b}, re-apply them there and {end}. Leave the stash empty.",
        "oops, I edited {f}{also} on {main} in {repo} - can you carry that over to {b}? {end_c}, and don't leave "
        "anything stashed.",
        "Stash the changes in {repo}, switch to {b}, apply them{also}; {end}; empty stash at the end.",
        "How do I get my uncommitted edit of {f}{also} from {main} onto {b} in {repo}? Just do it for me: {end}; "
        "{main}'s commits stay untouched and no stash entry remains.",
        "Goal: in {repo} the branch {b} is checked out with my work-in-progress on {f}{also} applied on top of "
        "it, {main} unchanged, and an empty stash list. Git refuses to switch with those changes, so set them "
        "aside first; {end}.",
        repo=repo_ref,
        f=rel,
        also=also,
        main=main,
        b=branch,
        end=end,
        end_c=_cap(end),
    )
    lines_ = [
        f'[ "$(git symbolic-ref -q HEAD)" = refs/heads/{branch} ] || exit 1',
        f'[ "$(git rev-parse {main})" = "$(cat {meta}.main)" ] || exit 1',
        '[ -z "$(git stash list)" ] || exit 1',
        f"diff {quote(rel)} <(printf %s {quote(want)}) >/dev/null || exit 1",
    ]
    if extra:
        lines_.append(f"[ -f {quote(extra)} ] || exit 1")
    if commit_msg:
        lines_ += [
            f'[ "$(git rev-parse HEAD^)" = "$(cat {meta}.branch)" ] || exit 1',
            f'[ "$(git log -1 --format=%s)" = {quote(commit_msg)} ] || exit 1',
            f"diff <(git show HEAD:{quote(rel)}) <(printf %s {quote(want)}) >/dev/null || exit 1",
        ]
        if extra:
            lines_.append(f"git cat-file -e HEAD:{quote(extra)} 2>/dev/null || exit 1")
    else:
        lines_.append(f'[ "$(git rev-parse HEAD)" = "$(cat {meta}.branch)" ] || exit 1')
    check = _check(repo_path, *lines_)
    stash = w.pick(
        (
            "git stash",
            "git stash push",
            f"git stash push -m {quote('wip ' + w.pick(WORDS))}",
            "git stash -u" if extra else "git stash save",
        )
    )
    go = w.pick((f"git switch {quote(branch)}", f"git checkout {quote(branch)}"))
    back = w.pick(("git stash pop", "git stash apply && git stash drop", "git stash pop --index"))
    steps = [stash, go, back]
    if w.chance(0.2):
        steps = (
            [f"git switch --merge {quote(branch)}"]
            if not extra or w.chance(0.5)
            else [f"git checkout -m {quote(branch)}"]
        )
    ref = [*_cd(w, repo_path, wd), "git status --short", *steps]
    if commit_msg:
        add = w.pick(("git add -A", f"git add {quote(rel)}" + (f" {quote(extra)}" if extra else "")))
        ref += [add, f"git commit -m {quote(commit_msg)}"]
    ref.append(w.pick(("git status", "git log --oneline -3 && git stash list")))
    return Draft(task=task, check=check, reference=ref, difficulty=3, files=files, setup=setup, workdir=wd)


@family(
    "git-squash-commits", "git", "squash the last N commits of a branch into one commit with a given message"
)
def squash_commits(w: World) -> Draft:
    repo_path = _repo_path(w)
    main = w.pick(("main", "master"))
    repo = _Repo(w, repo_path, branch=main)
    paths = _seed_files(w, repo, w.randint(3, 5))
    for _ in range(w.randint(1, 3)):
        repo.touch()
    on_branch = w.chance(0.6)
    branch = main
    if on_branch:
        branch = f"{w.pick(('feature', 'topic', 'wip'))}/{w.word()}"
        repo.branch_off(branch)
    n = w.randint(2, 5)
    for i in range(n):
        repo.touch(
            w.pick(paths),
            subject=w.pick(("wip", "fixup", "more", f"wip {i + 1}", "oops", "try again"))
            if w.chance(0.5)
            else None,
        )
    msg = f"{w.pick(_VERBS)} {w.pick(_NOUNS)}{w.pick(('', ' for ' + w.pick(SERVICES)))}"
    meta = f"/root/.squash-{w.token(6)}"
    repo.run(f"git rev-parse HEAD~{n} > {meta}.base && git rev-parse 'HEAD^{{tree}}' > {meta}.tree")
    if on_branch and w.chance(0.5):
        repo.switch(main)
    files, setup = repo.install()
    w.note(n, msg, branch)
    wd, repo_ref = _git_where(w, repo_path)
    which = _f(w, "the last {n} commits {on|of} {b}", n=n, b=branch)
    task = w.phrase(
        "Squash {which} in {repo} into a single commit with the message '{m}'.",
        "Ticket: before review, {which} in {repo} should become one commit, message '{m}'. The final content "
        "must not change.",
        "can you squash {which} into one? repo: {repo}. use '{m}' as the message",
        "{repo}: {which} -> one commit '{m}'.",
        "Why does {b} in {repo} have {n} tiny commits on top? Please make them one commit, '{m}', with exactly "
        "the same resulting files and the same commit underneath.",
        "History clean-up in {repo}: replace {which} by one commit whose message is '{m}'. Everything before "
        "those {n} commits stays as it is, and the tree at the tip must be identical to what it is now.",
        repo=repo_ref,
        which=which,
        m=msg,
        n=n,
        b=branch,
    )
    check = _check(
        repo_path,
        f'[ "$(git rev-parse {quote(branch)}^)" = "$(cat {meta}.base)" ] || exit 1',
        f'[ "$(git rev-parse \'{branch}^{{tree}}\')" = "$(cat {meta}.tree)" ] || exit 1',
        f'[ "$(git log -1 --format=%s {quote(branch)})" = {quote(msg)} ] || exit 1',
        '[ -z "$(git status --porcelain --untracked-files=no)" ] || exit 1',
    )
    ref = [*_cd(w, repo_path, wd), f"git log --oneline -{n + 2} {quote(branch)}"]
    if repo.branch != branch:
        ref.append(w.pick((f"git switch {quote(branch)}", f"git checkout {quote(branch)}")))
    how = w.pick(("soft", "soft", "softbase", "merge", "committree", "rebase"))
    if how == "soft":
        ref += [
            f"git reset --soft HEAD~{n}",
            w.pick((f"git commit -m {quote(msg)}", f"git commit -q -m {quote(msg)}")),
        ]
    elif how == "softbase":
        ref += [f"base=$(git rev-parse HEAD~{n})", 'git reset --soft "$base"', f"git commit -m {quote(msg)}"]
    elif how == "merge":
        ref += [
            "git branch -f squash-tmp HEAD",
            f"git reset -q --hard HEAD~{n}",
            "git merge --squash squash-tmp",
            f"git commit -m {quote(msg)}",
            "git branch -D squash-tmp",
        ]
    elif how == "committree":
        ref += [f"git reset -q --soft $(git commit-tree 'HEAD^{{tree}}' -p HEAD~{n} -m {quote(msg)})"]
    else:
        todo = "sed -i '2,$ s/^pick/squash/'"
        ref += [
            f"GIT_SEQUENCE_EDITOR={quote(todo)} GIT_EDITOR=true git rebase -q -i HEAD~{n}",
            f"git commit --amend -m {quote(msg)}",
        ]
    ref.append(w.pick(("git log --oneline -3", "git show --stat HEAD")))
    return Draft(task=task, check=check, reference=ref, difficulty=3, files=files, setup=setup, workdir=wd)
