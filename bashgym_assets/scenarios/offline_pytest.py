"""A small, dependency-free stand-in for ``pytest``, shipped inside the checks of imported evaluation suites.

Terminal-Bench and Harbor tasks verify with ``pytest tests/test_outputs.py``, installed at test time from the
network (``uvx -w pytest``, ``uv pip install pytest``). The sandbox has no network and its image has ``python3``
but no ``pytest``, so the importer writes THIS file as ``pytest.py`` into a temporary folder of the check, puts
that folder on ``PYTHONPATH`` and runs ``python3 -c 'import pytest, sys; sys.exit(pytest.main(sys.argv[1:]))'
<test files>``. Test modules that ``import pytest`` get this module.

What it supports (what those suites use; ``external.pytest_problems`` refuses tests that need more):
test functions and ``Test*`` classes (and ``unittest.TestCase`` classes), ``conftest.py`` fixtures, fixtures with
``yield`` teardown and function/class/module/session scope, ``params=`` fixtures with ``request.param``,
``pytest.mark.parametrize`` (stacked, ``pytest.param`` with ``marks``), ``skip``/``skipif``/``xfail`` marks,
module ``pytestmark``, xunit-style ``setup_module``/``teardown_module``, ``setup_class``/``teardown_class``,
``setup_method``/``teardown_method`` and ``setup_function``/``teardown_function`` (a failing set-up is an
ERROR of the tests it covers), ``pytest.raises``/``warns``/``approx``/``skip``/``fail``/``xfail``/``importorskip``, the
built-in fixtures ``tmp_path``, ``tmp_path_factory``, ``monkeypatch``, ``capsys``, ``capfd`` and ``request``.
Exit status as pytest's: 0 all passed, 1 some failed, 5 nothing collected.

Standard library only, Python >= 3.10; it must stay importable on its own (no bashgym imports).
"""

import contextlib
import importlib
import importlib.util
import inspect
import io
import itertools
import math
import os
import re
import shutil
import sys
import tempfile
import traceback
import unittest
import warnings

__version__ = "0-bashgym-offline"

SUPPORTED_ATTRS = frozenset(
    {
        "fixture",
        "mark",
        "raises",
        "warns",
        "approx",
        "skip",
        "fail",
        "xfail",
        "importorskip",
        "param",
        "main",
        "MonkeyPatch",
        "__version__",
    }
)
BUILTIN_FIXTURES = frozenset({"tmp_path", "tmp_path_factory", "monkeypatch", "capsys", "capfd", "request"})


class _Outcome(Exception):  # noqa: N818 - pytest's own naming
    def __init__(self, msg=""):
        super().__init__(msg)
        self.msg = msg


class Skipped(_Outcome):
    pass


class Failed(_Outcome):
    pass


class XFailed(_Outcome):
    pass


class _SetupError(_Outcome):
    """An xunit-style set-up failed: its tests are ERRORs, as pytest reports them."""


def skip(reason="", allow_module_level=False):
    raise Skipped(reason)


def fail(reason="", pytrace=True):
    raise Failed(reason)


def xfail(reason=""):
    raise XFailed(reason)


skip.Exception = Skipped
fail.Exception = Failed
xfail.Exception = XFailed


def importorskip(modname, minversion=None, reason=None):
    try:
        return importlib.import_module(modname)
    except ImportError:
        raise Skipped(reason or f"could not import {modname!r}") from None


# ---- marks ------------------------------------------------------------------------------------------------
class Mark:
    def __init__(self, name, args=(), kwargs=None):
        self.name, self.args, self.kwargs = name, tuple(args), dict(kwargs or {})


class MarkDecorator:
    def __init__(self, mark):
        self.mark = mark

    @property
    def name(self):
        return self.mark.name

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
            target = args[0]
            marks = list(getattr(target, "pytestmark", []))
            marks.append(self.mark)
            target.pytestmark = marks
            return target
        return MarkDecorator(Mark(self.mark.name, self.mark.args + args, {**self.mark.kwargs, **kwargs}))


class _MarkFactory:
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return MarkDecorator(Mark(name))


mark = _MarkFactory()


class ParameterSet:
    def __init__(self, values, marks=(), id=None):  # noqa: A002 - pytest's keyword
        self.values, self.id = tuple(values), id
        self.marks = [
            m.mark if isinstance(m, MarkDecorator) else m
            for m in (marks if isinstance(marks, (list, tuple)) else [marks])
        ]


def param(*values, marks=(), id=None):  # noqa: A002
    return ParameterSet(values, marks, id)


# ---- fixtures ---------------------------------------------------------------------------------------------
class FixtureDef:
    def __init__(self, func, scope="function", params=None, autouse=False, name=None, ids=None):
        self.func, self.scope, self.autouse = func, scope or "function", autouse
        self.params = list(params) if params is not None else None
        self.name = name or func.__name__


def fixture(fixture_function=None, *, scope="function", params=None, autouse=False, ids=None, name=None):
    def wrap(func):
        func._pytestfixturefunction = FixtureDef(func, scope, params, autouse, name, ids)
        return func

    if fixture_function is not None and callable(fixture_function):
        return wrap(fixture_function)
    return wrap


class _Request:
    def __init__(self, param_value=None, node_name="", module=None, cls=None):
        self.param = param_value
        self.node = type("Node", (), {"name": node_name})()
        self.module, self.cls = module, cls
        self.function = None
        self._finalizers = []
        self.config = type("Config", (), {"getoption": staticmethod(lambda *a, **k: None)})()

    def addfinalizer(self, func):
        self._finalizers.append(func)


class TempPathFactory:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="pytest-offline-")

    def mktemp(self, basename="tmp", numbered=True):
        import pathlib

        return pathlib.Path(tempfile.mkdtemp(prefix=basename, dir=self.root))

    def getbasetemp(self):
        import pathlib

        return pathlib.Path(self.root)


_NOTSET = object()


class MonkeyPatch:
    def __init__(self):
        self._undo = []
        self._cwd = None

    @classmethod
    @contextlib.contextmanager
    def context(cls):
        mp = cls()
        try:
            yield mp
        finally:
            mp.undo()

    def setattr(self, target, name, value=_NOTSET, raising=True):
        if value is _NOTSET:
            if not isinstance(target, str):
                raise TypeError("use setattr(target, name, value) or setattr('module.name', value)")
            module, _, attr = target.rpartition(".")
            value, name, target = name, attr, importlib.import_module(module)
        old = getattr(target, name, _NOTSET)
        if old is _NOTSET and raising:
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        self._undo.append(lambda: delattr(target, name) if old is _NOTSET else setattr(target, name, old))
        setattr(target, name, value)

    def delattr(self, target, name=_NOTSET, raising=True):
        if name is _NOTSET:
            module, _, name = target.rpartition(".")
            target = importlib.import_module(module)
        if not hasattr(target, name):
            if raising:
                raise AttributeError(name)
            return
        old = getattr(target, name)
        self._undo.append(lambda: setattr(target, name, old))
        delattr(target, name)

    def setitem(self, dic, name, value):
        old = dic.get(name, _NOTSET)
        self._undo.append(lambda: dic.pop(name, None) if old is _NOTSET else dic.__setitem__(name, old))
        dic[name] = value

    def delitem(self, dic, name, raising=True):
        if name not in dic:
            if raising:
                raise KeyError(name)
            return
        old = dic[name]
        self._undo.append(lambda: dic.__setitem__(name, old))
        del dic[name]

    def setenv(self, name, value, prepend=None):
        value = str(value)
        if prepend and name in os.environ:
            value = value + prepend + os.environ[name]
        self.setitem(os.environ, name, value)

    def delenv(self, name, raising=True):
        self.delitem(os.environ, name, raising)

    def syspath_prepend(self, path):
        old = list(sys.path)
        self._undo.append(lambda: sys.path.__setitem__(slice(None), old))
        sys.path.insert(0, str(path))

    def chdir(self, path):
        if self._cwd is None:
            self._cwd = os.getcwd()
        os.chdir(str(path))

    def undo(self):
        for func in reversed(self._undo):
            func()
        self._undo.clear()
        if self._cwd is not None:
            os.chdir(self._cwd)
            self._cwd = None


class CaptureResult(tuple):
    def __new__(cls, out, err):
        return super().__new__(cls, (out, err))

    out = property(lambda self: self[0])
    err = property(lambda self: self[1])


class CaptureFixture:
    def __init__(self):
        self._out, self._err = io.StringIO(), io.StringIO()
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = self._out, self._err

    def readouterr(self):
        out, err = self._out.getvalue(), self._err.getvalue()
        self._out.seek(0)
        self._out.truncate()
        self._err.seek(0)
        self._err.truncate()
        return CaptureResult(out, err)

    @contextlib.contextmanager
    def disabled(self):
        sys.stdout, sys.stderr = self._saved
        try:
            yield
        finally:
            sys.stdout, sys.stderr = self._out, self._err

    def close(self):
        sys.stdout, sys.stderr = self._saved


# ---- raises / warns / approx ------------------------------------------------------------------------------
class ExceptionInfo:
    def __init__(self):
        self.type = self.value = self.tb = None

    def match(self, regexp):
        if not re.search(regexp, str(self.value)):
            raise AssertionError(f"regex {regexp!r} does not match {str(self.value)!r}")
        return True

    @property
    def typename(self):
        return self.type.__name__ if self.type else ""


class _RaisesContext:
    def __init__(self, expected, match):
        self.expected, self.match_expr = expected, match
        self.excinfo = ExceptionInfo()

    def __enter__(self):
        return self.excinfo

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            raise Failed(f"DID NOT RAISE {self.expected!r}")
        if not issubclass(exc_type, self.expected):
            return False
        self.excinfo.type, self.excinfo.value, self.excinfo.tb = exc_type, exc, tb
        if self.match_expr is not None:
            self.excinfo.match(self.match_expr)
        return True


def raises(expected_exception, *args, match=None, **kwargs):
    ctx = _RaisesContext(expected_exception, match)
    if not args:
        return ctx
    with ctx:
        args[0](*args[1:], **kwargs)
    return ctx.excinfo


class _WarnsContext(warnings.catch_warnings):
    def __init__(self, expected, match):
        super().__init__(record=True)
        self.expected, self.match_expr = expected, match

    def __enter__(self):
        self.list = super().__enter__()
        warnings.simplefilter("always")
        return self.list

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if exc[0] is not None:
            return False
        hits = [
            w
            for w in self.list
            if issubclass(w.category, self.expected)
            and (self.match_expr is None or re.search(self.match_expr, str(w.message)))
        ]
        if not hits:
            raise Failed(f"DID NOT WARN {self.expected!r}")
        return False


def warns(expected_warning=Warning, *args, match=None, **kwargs):
    ctx = _WarnsContext(expected_warning, match)
    if not args:
        return ctx
    with ctx:
        return args[0](*args[1:], **kwargs)


class ApproxBase:
    def __init__(self, expected, rel=None, abs=None):  # noqa: A002 - pytest's keyword
        self.expected, self.rel, self.abs = expected, rel, abs

    def _close(self, actual, expected):
        if isinstance(expected, (list, tuple)):
            return (
                isinstance(actual, (list, tuple))
                and len(actual) == len(expected)
                and all(self._close(a, e) for a, e in zip(actual, expected, strict=True))
            )
        if isinstance(expected, dict):
            return (
                isinstance(actual, dict)
                and set(actual) == set(expected)
                and all(self._close(actual[k], expected[k]) for k in expected)
            )
        if not isinstance(expected, (int, float, complex)) or isinstance(expected, bool):
            return actual == expected
        try:
            if expected == actual:
                return True
            if isinstance(expected, float) and math.isinf(expected):
                return False
            abs_tol = 1e-12 if self.abs is None else self.abs
            rel_tol = 1e-6 if self.rel is None and self.abs is None else (self.rel or 0.0)
            return abs(actual - expected) <= max(rel_tol * abs(expected), abs_tol)
        except TypeError:
            return False

    def __eq__(self, actual):
        try:  # numpy-like arrays compare element-wise
            if hasattr(actual, "tolist") and not isinstance(self.expected, (int, float)):
                actual = actual.tolist()
        except Exception:
            pass
        return self._close(actual, self.expected)

    __hash__ = None

    def __ne__(self, actual):
        return not self == actual

    def __repr__(self):
        return f"approx({self.expected!r})"


def approx(expected, rel=None, abs=None, nan_ok=False):  # noqa: A002
    return ApproxBase(expected, rel, abs)


# ---- collection -------------------------------------------------------------------------------------------
def _marks(obj):
    marks = getattr(obj, "pytestmark", [])
    return list(marks) if isinstance(marks, (list, tuple)) else [marks]


def _as_mark(m):
    return m.mark if isinstance(m, MarkDecorator) else m


class Item:
    def __init__(self, name, func, module, cls=None, params=None, marks=(), fixture_params=None):
        self.name, self.func, self.module, self.cls = name, func, module, cls
        self.params = dict(params or {})
        self.marks = [_as_mark(m) for m in marks]
        self.fixture_params = dict(fixture_params or {})
        self.instance = None  # the test class's instance this test runs on (shared with its setup_method)


def _parametrize(func, marks):
    """The cartesian product of stacked parametrize marks: [(id suffix, {arg: value}, extra marks)]."""
    combos = [("", {}, [])]
    for m in marks:
        if m.name != "parametrize":
            continue
        argnames = m.args[0] if m.args else m.kwargs["argnames"]
        argvalues = m.args[1] if len(m.args) > 1 else m.kwargs["argvalues"]
        names = [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
        ids = m.kwargs.get("ids")
        rows = []
        for i, value in enumerate(argvalues):
            extra = []
            pid = None
            if isinstance(value, ParameterSet):
                extra, pid, value = value.marks, value.id, value.values
                if len(names) == 1:
                    value = value[0]
            values = (value,) if len(names) == 1 else tuple(value)
            if pid is None and isinstance(ids, (list, tuple)) and i < len(ids):
                pid = ids[i]
            if pid is None:
                pid = "-".join(
                    str(v) if isinstance(v, (int, float, str, bool)) and len(str(v)) < 40 else f"{n}{i}"
                    for n, v in zip(names, values, strict=False)
                )
            rows.append((str(pid), dict(zip(names, values, strict=False)), extra))
        combos = [
            (a[0] + ("-" if a[0] else "") + b[0], {**a[1], **b[1]}, a[2] + b[2])
            for a, b in itertools.product(combos, rows)
        ]
    return combos


class Session:
    def __init__(self):
        self.fixtures = {}  # name -> FixtureDef (conftest and module level, later ones win per module)
        self.cache = {}  # (scope key, name, param index) -> value
        self.teardowns = {"session": [], "module": [], "class": []}
        self.tmp_factory = TempPathFactory()
        self.conftests = set()
        self.passed = self.failed = self.skipped = self.xfailed = self.errors = 0
        self.failures = []

    # loading
    def load_conftest(self, folder):
        path = os.path.join(folder, "conftest.py")
        if path in self.conftests or not os.path.isfile(path):
            return {}
        self.conftests.add(path)
        mod = self._import(path, f"conftest_{len(self.conftests)}")
        return self._fixtures_of(mod)

    def _import(self, path, name):
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    @staticmethod
    def _fixtures_of(obj):
        found = {}
        for attr in dir(obj):
            value = getattr(obj, attr, None)
            fdef = getattr(value, "_pytestfixturefunction", None)
            if isinstance(fdef, FixtureDef):
                found[fdef.name] = fdef
        return found

    def collect(self, path):
        folder = os.path.dirname(os.path.abspath(path))
        base_fixtures = dict(self.fixtures)
        base_fixtures.update(self.load_conftest(folder))
        self.fixtures = base_fixtures
        stem = os.path.splitext(os.path.basename(path))[0]
        module = self._import(path, stem)
        module_fixtures = {**base_fixtures, **self._fixtures_of(module)}
        module_marks = [_as_mark(m) for m in _marks(module)]
        items = []
        for name, obj in list(vars(module).items()):
            if inspect.isfunction(obj) and name.startswith("test") and obj.__module__ == module.__name__:
                items.extend(
                    self._items(name, obj, module, None, module_marks + [_as_mark(m) for m in _marks(obj)])
                )
            elif inspect.isclass(obj) and obj.__module__ == module.__name__:
                if issubclass(obj, unittest.TestCase):
                    items.append(Item(name, obj, module, cls=obj, marks=module_marks))
                elif name.startswith("Test") and "__init__" not in vars(obj):
                    cls_marks = module_marks + [_as_mark(m) for m in _marks(obj)]
                    for mname in sorted(vars(obj)):
                        meth = vars(obj)[mname]
                        if mname.startswith("test") and inspect.isfunction(meth):
                            own = [_as_mark(m) for m in _marks(meth) if _as_mark(m) not in cls_marks]
                            items.extend(self._items(name + "::" + mname, meth, module, obj, cls_marks + own))
        class_fixtures = {}
        for item in items:
            if item.cls is not None and not issubclass(item.cls, unittest.TestCase):
                class_fixtures.update(self._fixtures_of(item.cls))
        return items, {**module_fixtures, **class_fixtures}

    def _items(self, name, func, module, cls, marks):
        out = []
        for pid, params, extra in _parametrize(func, marks):
            out.append(Item(name + (f"[{pid}]" if pid else ""), func, module, cls, params, marks + extra))
        return out

    # running
    def _resolve(self, fname, item, fixtures, stack, scope_keys, func_teardowns, request_param=_NOTSET):
        if fname in item.params:
            return item.params[fname]
        if fname == "request":
            return _Request(None, item.name, item.module, item.cls)
        if fname == "tmp_path":
            return self.tmp_factory.mktemp("test")
        if fname == "tmp_path_factory":
            return self.tmp_factory
        if fname == "monkeypatch":
            mp = MonkeyPatch()
            func_teardowns.append(mp.undo)
            return mp
        if fname in ("capsys", "capfd"):
            cap = CaptureFixture()
            func_teardowns.append(cap.close)
            return cap
        fdef = fixtures.get(fname)
        if fdef is None:
            raise LookupError(f"fixture {fname!r} not found")
        if fname in stack:
            raise LookupError(f"recursive fixture {fname!r}")
        param_index = item.fixture_params.get(fname)
        key = (scope_keys.get(fdef.scope, id(item)), fname, param_index)
        if fdef.scope != "function" and key in self.cache:
            return self.cache[key]
        kwargs = {}
        for arg in _argnames(fdef.func):
            if arg == "request":
                value = (
                    fdef.params[param_index] if fdef.params is not None and param_index is not None else None
                )
                if isinstance(value, ParameterSet):
                    value = value.values[0] if len(value.values) == 1 else value.values
                req = _Request(value, item.name, item.module, item.cls)
                kwargs[arg] = req
                (
                    func_teardowns
                    if fdef.scope == "function"
                    else self.teardowns.get(fdef.scope, func_teardowns)
                ).append(lambda r=req: [f() for f in reversed(r._finalizers)])
            else:
                kwargs[arg] = self._resolve(arg, item, fixtures, stack + [fname], scope_keys, func_teardowns)
        func = fdef.func
        if item.cls is not None and "self" in _argnames(func, keep_self=True):
            func = getattr(item.instance if item.instance is not None else item.cls(), func.__name__)
        result = func(**kwargs)
        if inspect.isgenerator(result):
            gen = result
            result = next(gen)

            def finish(g=gen):
                with contextlib.suppress(StopIteration):
                    next(g)

            (
                func_teardowns if fdef.scope == "function" else self.teardowns.get(fdef.scope, func_teardowns)
            ).append(finish)
        if fdef.scope != "function":
            self.cache[key] = result
        return result

    def _expand_fixture_params(self, items, fixtures):
        out = []
        for item in items:
            variants = [item]
            for fname in self._needed(item, fixtures):
                fdef = fixtures.get(fname)
                if fdef is None or fdef.params is None:
                    continue
                new = []
                for v in variants:
                    for i in range(len(fdef.params)):
                        clone = Item(
                            v.name, v.func, v.module, v.cls, v.params, v.marks, {**v.fixture_params, fname: i}
                        )
                        clone.name = v.name + f"[{fname}{i}]"
                        new.append(clone)
                variants = new
            out.extend(variants)
        return out

    def _needed(self, item, fixtures, seen=None):
        seen = seen if seen is not None else []
        names = [f.name for f in fixtures.values() if f.autouse] + _argnames(item.func)
        for name in names:
            if name in seen or name in item.params:
                continue
            seen.append(name)
            fdef = fixtures.get(name)
            if fdef is not None:
                self._needed(Item(name, fdef.func, item.module), fixtures, seen)
        return seen

    def xunit_setup(self, owner, setup_names, teardown_names, arg, scope):
        """pytest's xunit-style set-up of a module or class: the set-up now, its teardown when the scope closes.
        Returns the set-up's traceback when it failed (its tests are then ERRORs and the teardown is not run)."""
        setup = next((getattr(owner, n) for n in setup_names if callable(getattr(owner, n, None))), None)
        teardown = next(
            (getattr(owner, n) for n in teardown_names if callable(getattr(owner, n, None))), None
        )
        if setup is not None:
            try:
                _call_optional(setup, arg)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                return f"error in {setup.__name__}\n" + traceback.format_exc()
        if teardown is not None:
            self.teardowns[scope].append(lambda: _call_optional(teardown, arg))
        return None

    def run_item(self, item, fixtures, scope_keys, setup_error=None):
        if setup_error:
            return self._report(item, "ERROR", setup_error)
        for m in item.marks:
            if m.name == "skip":
                return self._report(item, "SKIPPED", m.kwargs.get("reason", (m.args or [""])[0]))
            if m.name == "skipif":
                cond = m.args[0] if m.args else m.kwargs.get("condition")
                if isinstance(cond, str):
                    cond = eval(cond, vars(item.module))
                if cond:
                    return self._report(item, "SKIPPED", m.kwargs.get("reason", ""))
        xfail_mark = next((m for m in item.marks if m.name == "xfail" and (not m.args or m.args[0])), None)
        if inspect.isclass(item.func) and issubclass(item.func, unittest.TestCase):
            suite = unittest.defaultTestLoader.loadTestsFromTestCase(item.func)
            result = unittest.TestResult()
            suite.run(result)
            bad = result.failures + result.errors
            if bad:
                return self._report(item, "FAILED", "\n".join(text for _, text in bad))
            return self._report(item, "PASSED")
        func_teardowns = []
        try:
            if item.cls is not None:
                item.instance = item.cls()
                owner, names = item.instance, ("setup_method", "teardown_method")
            else:
                owner, names = item.module, ("setup_function", "teardown_function")
            setup, teardown = (getattr(owner, n, None) for n in names)
            if callable(setup):
                try:
                    _call_optional(setup, item.func)
                except (Skipped, XFailed):
                    raise
                except Exception as exc:
                    raise _SetupError(f"error in {names[0]}\n" + traceback.format_exc()) from exc
            if callable(teardown):
                func_teardowns.insert(0, lambda: _call_optional(teardown, item.func))  # after the fixtures'
            kwargs = {}
            for name in [f.name for f in fixtures.values() if f.autouse] + _argnames(item.func):
                value = self._resolve(name, item, fixtures, [], scope_keys, func_teardowns)
                if name in _argnames(item.func):
                    kwargs[name] = value
            func = item.func
            if item.cls is not None:
                func = getattr(item.instance, item.func.__name__)
            func(**kwargs)
            outcome, detail = "PASSED", ""
        except _SetupError as exc:
            outcome, detail = "ERROR", exc.msg
        except Skipped as exc:
            outcome, detail = "SKIPPED", exc.msg
        except XFailed as exc:
            outcome, detail = "XFAIL", exc.msg
        except LookupError as exc:
            if "fixture" in str(exc):
                outcome, detail = "ERROR", str(exc)
            else:
                outcome, detail = "FAILED", traceback.format_exc()
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            outcome, detail = "FAILED", traceback.format_exc()
        finally:
            for td in reversed(func_teardowns):
                try:
                    td()
                except Exception:
                    traceback.print_exc()
        if xfail_mark is not None:
            outcome = (
                "XFAIL"
                if outcome == "FAILED"
                else (
                    "FAILED"
                    if xfail_mark.kwargs.get("strict")
                    else "XPASS"
                    if outcome == "PASSED"
                    else outcome
                )
            )
        return self._report(item, outcome, detail)

    def _report(self, item, outcome, detail=""):
        label = f"{os.path.basename(item.module.__file__)}::{item.name}"
        print(f"{label} {outcome}", flush=True)
        if outcome == "PASSED" or outcome == "XPASS":
            self.passed += 1
        elif outcome == "SKIPPED":
            self.skipped += 1
        elif outcome == "XFAIL":
            self.xfailed += 1
        elif outcome == "ERROR":
            self.errors += 1
            self.failures.append((label, detail))
        else:
            self.failed += 1
            self.failures.append((label, detail))

    def close(self, scope):
        for td in reversed(self.teardowns[scope]):
            try:
                td()
            except Exception:
                traceback.print_exc()
        self.teardowns[scope] = []


def _call_optional(func, arg):
    """Call an xunit-style hook with its argument (module, class, test function) when it declares one, as pytest
    does: ``setup_method(self)`` and ``setup_method(self, method)`` are both valid."""
    return func(arg) if _argnames(func, keep_self=True) else func()


def _argnames(func, keep_self=False):
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    names = [
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
    ]
    return names if keep_self else [n for n in names if n not in ("self", "cls")]


def _test_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
                files.extend(
                    os.path.join(root, n)
                    for n in sorted(names)
                    if n.endswith(".py") and (n.startswith("test_") or n.endswith("_test.py"))
                )
        elif os.path.isfile(p):
            files.append(p)
        else:
            print(f"ERROR: file or directory not found: {p}")
            return None
    return files


def main(args=None, plugins=None):
    """Run the tests of the given files/folders (options are ignored); pytest's exit codes."""
    args = list(sys.argv[1:] if args is None else args)
    paths, skip_next = [], False
    value_options = {
        "-k",
        "-m",
        "-p",
        "-o",
        "-c",
        "-W",
        "--ctrf",
        "--junitxml",
        "--junit-xml",
        "--timeout",
        "--rootdir",
        "--tb",
        "--maxfail",
        "--durations",
        "--log-level",
        "--basetemp",
        "--deselect",
        "--ignore",
        "--confcutdir",
        "--cov",
        "--cov-report",
        "--json-report-file",
    }
    for a in args:
        if skip_next:
            skip_next = False
            continue
        if a.startswith("-"):
            skip_next = a in value_options
            continue
        paths.append(a.split("::", 1)[0])
    files = _test_files(paths or ["."])
    if files is None:
        return 4
    session = Session()
    collected = 0
    try:
        for path in files:
            try:
                items, fixtures = session.collect(path)
            except Skipped as exc:
                print(f"{path} SKIPPED (module): {exc.msg}")
                continue
            except BaseException:
                session.errors += 1
                session.failures.append((path, "collection error\n" + traceback.format_exc()))
                print(f"{path} ERROR (collection)")
                continue
            items = session._expand_fixture_params(items, fixtures)
            collected += len(items)
            module_key = ("module", path)
            module_error = (
                session.xunit_setup(
                    items[0].module,
                    ("setup_module", "setUpModule"),
                    ("teardown_module", "tearDownModule"),
                    items[0].module,
                    "module",
                )
                if items
                else None
            )
            last_cls, class_error = None, None
            for item in items:
                if item.cls is not last_cls:
                    session.close("class")
                    last_cls, class_error = item.cls, None
                    if (
                        item.cls is not None
                        and not issubclass(item.cls, unittest.TestCase)
                        and not module_error
                    ):
                        class_error = session.xunit_setup(
                            item.cls, ("setup_class",), ("teardown_class",), item.cls, "class"
                        )
                scope_keys = {
                    "session": "session",
                    "package": "session",
                    "module": module_key,
                    "class": (module_key, id(item.cls)),
                }
                session.run_item(item, fixtures, scope_keys, module_error or class_error)
            session.close("class")
            session.close("module")
    finally:
        session.close("session")
        shutil.rmtree(session.tmp_factory.root, ignore_errors=True)
    for label, detail in session.failures:
        print(f"\n____ {label} ____\n{detail.rstrip()}")
    print(
        f"\n== {session.passed} passed, {session.failed} failed, {session.errors} errors, "
        f"{session.skipped} skipped, {session.xfailed} xfailed (bashgym offline pytest) =="
    )
    if session.failed or session.errors:
        return 1
    return 0 if collected else 5


if __name__ == "__main__":
    sys.exit(main())
