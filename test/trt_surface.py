"""The TensorRT names vrt_ros's wrapper uses, collected from its source, and where each version has them.

Used by test/test_tensorrt_surfaces.py. Nothing here is a hand list of TensorRT names: :func:`collect` reads the
wrapper's modules with :mod:`ast` and follows the TensorRT objects through them, typing each expression from the
TensorRT 10.13 type stubs (``tensorrt-stubs``, the return annotation of every method and property):

- ``trt`` / ``self._trt`` is the TensorRT module; ``trt.X`` a class or enum; ``trt.X(...)`` an instance;
  ``obj.m(...)`` whatever the stubs say ``m`` returns; names and ``self.``/``b.`` attributes keep the type assigned to
  them, function parameters the type passed at their call sites;
- a *use* is every attribute read on a TensorRT object, every ``hasattr``/``getattr`` name (the wrapper's own
  guards), every method a subclass of a TensorRT class defines (TensorRT calls it), and every enum member compared
  by name (``enum_name(engine.get_tensor_mode(n)) == "INPUT"``, the keys of ``DTYPES``);
- each use carries the *guards* it sits behind: ``if not hasattr(trt, "Builder"): raise`` before it in its function
  (or in every caller), ``if hasattr(...)`` / ``if x is not None`` (x from ``getattr(..., None)``) around it, a
  variable assigned from ``not hasattr(...)`` tested false, ``flavour is TENSORRT_RTX``.

A name missing from one TensorRT is acceptable when the use is its own guard (``hasattr``/``getattr``), or when one
of its guards is missing there too (the code path is not taken); otherwise the wrapper would raise AttributeError.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

MODULE = "module"
WRAPPER_GLOB = ("tensorrt.py", "trt_*.py")  # in vrt_ros/engines: the wrapper and its helper modules
# Dicts in the wrapper whose keys are TensorRT enum member names (read through enum_name()): which enum.
KEYED_BY_ENUM = {"DTYPES": "DataType", "_LEVELS": "ILogger.Severity"}
FLAVOUR_CONSTANTS = {"TENSORRT": "tensorrt", "TENSORRT_RTX": "tensorrt_rtx"}
_ENUM_NAME_FUNCS = {"enum_name", "_enum_name"}


# ==============================================================================================================
# The stubs: classes, members, types
# ==============================================================================================================
@dataclass
class StubClass:
    name: str  # dotted for nested classes ("ILogger.Severity")
    members: dict[str, str | None] = field(default_factory=dict)  # member -> its type's class name (None: unknown)
    methods: set[str] = field(default_factory=set)
    is_enum: bool = False


def _parse_lenient(text: str) -> ast.Module:
    """ast.parse, mending the few stub lines that do not parse: a parameter without default after defaulted ones
    (the defaults are dropped), a parameter named with a keyword (the parameters are dropped)."""
    lines = text.splitlines()
    for _ in range(200):
        try:
            return ast.parse("\n".join(lines))
        except SyntaxError as exc:
            i = (exc.lineno or 1) - 1
            fixed = re.sub(r"\s*=\s*[^,()]+(?=[,)])", "", lines[i])
            if fixed == lines[i]:  # e.g. a parameter named `in`: keep the name and return type only
                fixed = re.sub(r"def (\w+)\(.*\)", r"def \1(self, *args, **kwargs)", lines[i])
            if fixed == lines[i]:
                raise
            lines[i] = fixed
    raise SyntaxError("too many unparsable stub lines")


class Stubs:
    """The TensorRT 10.13 API as its type stubs declare it (``tensorrt_bindings/tensorrt.pyi``)."""

    def __init__(self, pyi: Path) -> None:
        self.classes: dict[str, StubClass] = {}
        tree = _parse_lenient(Path(pyi).read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self._add(node, "")

    def _add(self, node: ast.ClassDef, prefix: str) -> None:
        cls = StubClass(prefix + node.name)
        self.classes[cls.name] = cls
        for item in node.body:
            if isinstance(item, ast.ClassDef):
                self._add(item, cls.name + ".")
                cls.members[item.name] = None
            elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                is_prop = any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
                ret = ast.unparse(item.returns) if item.returns is not None else ""
                if item.name not in cls.members or cls.members[item.name] is None:
                    cls.members[item.name] = ret or None
                if not is_prop:
                    cls.methods.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                ann = ast.unparse(item.annotation)
                cls.members[item.target.id] = ann
                if ann == f"typing.ClassVar[{node.name}]":
                    cls.is_enum = True

    def resolve(self, annotation: str | None, context: str = "") -> str | None:
        """The stub class an annotation names ("typing.Optional[ICudaEngine]" -> "ICudaEngine"), or None."""
        if not annotation:
            return None
        for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", annotation):
            ident = ident.removeprefix("tensorrt.").removeprefix("tensorrt_bindings.tensorrt.")
            if ident in ("typing", "None", "int", "str", "bool", "float"):
                continue
            for cand in (f"{context}.{ident}" if context else "", ident):
                if cand and cand in self.classes:
                    return cand
        return None

    def has(self, owner: str, name: str) -> bool | None:
        if owner == MODULE:
            return name in self.classes or name == "__version__"
        cls = self.classes.get(owner)
        return None if cls is None else name in cls.members


# ==============================================================================================================
# Collecting the uses
# ==============================================================================================================
@dataclass(frozen=True)
class Use:
    owner: str  # "module", a class ("ICudaEngine"), or an enum ("DataType")
    name: str
    where: str  # "trt_build.py:212"
    self_guard: bool = False  # read through hasattr/getattr
    guards: frozenset = frozenset()  # (owner, name) pairs and ("flavour", name) it is only reached with

    @property
    def qualname(self) -> str:
        return self.name if self.owner == MODULE else f"{self.owner}.{self.name}"


# Types of expressions: ("module",), ("class", name), ("inst", name), ("method", owner, name)
def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _key(node.value)
        # one engine's handles: ``self._h`` in the engine, ``h`` in the helpers it passes them to (trt_runtime.Handles)
        return f"{'h' if inner == 'self._h' else inner}.{node.attr}" if inner else None
    return None


class _Collector:
    def __init__(self, stubs: Stubs, trees: dict[str, ast.Module]) -> None:
        self.stubs = stubs
        self.trees = trees
        self.funcs: dict[str, ast.FunctionDef] = {}
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    self.funcs.setdefault(node.name, node)
        self.modules = {Path(f).stem for f in trees}  # `trt_precision.report(...)` calls a wrapper function
        self.attr_types: dict[str, tuple] = {"self._trt": (MODULE,)}  # attribute chains, across functions
        self.param_types: dict[tuple[str, str], tuple] = {}
        self.entry_guards: dict[str, frozenset | None] = {}  # function -> guards common to every call site
        self.call_guards: dict[str, list[frozenset]] = {}
        self.uses: set[Use] = set()

    # ---- types ------------------------------------------------------------------------------------------------
    def typeof(self, node: ast.AST, env: dict) -> tuple | None:
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            return (MODULE,) if node.id == "trt" else None
        if isinstance(node, ast.Attribute):
            key = _key(node)
            if key in self.attr_types:
                return self.attr_types[key]
            return self._member_type(self.typeof(node.value, env), node.attr)
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id == "getattr" and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return self._member_type(self.typeof(node.args[0], env), name.value)
                return None
            t = self.typeof(fn, env)
            if t and t[0] == "class":
                return ("inst", t[1])
            if t and t[0] == "method":
                cls = self.stubs.classes.get(t[1])
                ret = cls.members.get(t[2]) if cls else None
                r = self.stubs.resolve(ret, t[1])
                return ("inst", r) if r else None
        return None

    def _member_type(self, t: tuple | None, attr: str) -> tuple | None:
        if t is None:
            return None
        if t[0] == MODULE:
            return ("class", attr) if attr in self.stubs.classes else None
        cls = self.stubs.classes.get(t[1])
        if cls is None or attr not in cls.members:
            return None
        nested = f"{t[1]}.{attr}"
        if nested in self.stubs.classes:
            return ("class", nested)
        if t[0] == "class" and cls.is_enum:
            return ("inst", t[1])
        if attr in cls.methods:
            return ("method", t[1], attr)
        r = self.stubs.resolve(cls.members[attr], t[1])
        return ("inst", r) if r else None

    @staticmethod
    def _owner(t: tuple | None) -> str | None:
        if t is None:
            return None
        return MODULE if t[0] == MODULE else (t[1] if t[0] in ("class", "inst") else None)

    # ---- guards -----------------------------------------------------------------------------------------------
    def _guard_of_call(self, node: ast.AST, env: dict) -> tuple | None:
        """(owner, name) for hasattr(X, "name") / getattr(X, "name", ...)."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
            owner = self._owner(self.typeof(node.args[0], env))
            if owner:
                return owner, node.args[1].value
        return None

    def guards_in(self, test: ast.AST, env: dict, gvars: dict, positive: bool) -> set:
        """The guards a condition asserts present when it is true (positive) or when it is false (not positive)."""
        out: set = set()
        if isinstance(test, ast.BoolOp):
            # `a and b` true: both true; `a or b` false: both false
            if (isinstance(test.op, ast.And) and positive) or (isinstance(test.op, ast.Or) and not positive):
                for v in test.values:
                    out |= self.guards_in(v, env, gvars, positive)
            return out
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.guards_in(test.operand, env, gvars, not positive)
        g = self._guard_of_call(test, env)
        if g and positive:
            return {g}
        if isinstance(test, ast.Name) and test.id in gvars:
            sense, pairs = gvars[test.id]  # sense: True when the variable being true means present
            return set(pairs) if sense == positive else set()
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(left, ast.Name) and left.id in gvars and isinstance(right, ast.Constant) and right.value is None:
                sense, pairs = gvars[left.id]
                is_present = isinstance(op, ast.IsNot) == positive
                return set(pairs) if (is_present and sense) else set()
            if isinstance(op, (ast.Is, ast.Eq)) and positive and isinstance(right, ast.Name) and right.id in FLAVOUR_CONSTANTS:
                return {("flavour", FLAVOUR_CONSTANTS[right.id])}
        return out

    # ---- walking ----------------------------------------------------------------------------------------------
    def run(self, passes: int = 4) -> set[Use]:
        for _ in range(passes):
            self.uses = set()
            self.call_guards = {}
            for fname, tree in self.trees.items():
                self._block(tree.body, {}, {}, frozenset(), fname)
            self.entry_guards = {f: frozenset.intersection(*g) if g else None for f, g in self.call_guards.items()}
        return self.uses

    def _use(self, owner: str | None, name: str, node: ast.AST, fname: str, guards: frozenset,
             self_guard: bool = False) -> None:
        if owner is None or (name.startswith("__") and name != "__version__"):
            return
        self.uses.add(Use(owner, name, f"{fname}:{node.lineno}", self_guard, guards))

    def _block(self, body: list, env: dict, gvars: dict, guards: frozenset, fname: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                self._expr(stmt.test, env, gvars, guards, fname)
                inside = guards | self.guards_in(stmt.test, env, gvars, True)
                self._block(stmt.body, env, gvars, frozenset(inside), fname)
                self._block(stmt.orelse, env, gvars, frozenset(guards | self.guards_in(stmt.test, env, gvars, False)), fname)
                if stmt.body and isinstance(stmt.body[-1], (ast.Raise, ast.Return)) and not stmt.orelse:
                    guards = frozenset(guards | self.guards_in(stmt.test, env, gvars, False))
                continue
            if isinstance(stmt, ast.FunctionDef):
                self._function(stmt, env, gvars, guards, fname)
                continue
            if isinstance(stmt, ast.ClassDef):
                for base in stmt.bases:
                    self._expr(base, env, gvars, guards, fname)
                    t = self.typeof(base, env)
                    if t and t[0] == "class":
                        for item in stmt.body:
                            if isinstance(item, ast.FunctionDef):
                                self._use(t[1], item.name, item, fname, guards)
                for item in stmt.body:
                    if isinstance(item, ast.FunctionDef):
                        self._function(item, env, gvars, guards, fname)
                    else:
                        self._block([item], env, gvars, guards, fname)
                continue
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                value = stmt.value
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if value is not None:
                    self._expr(value, env, gvars, guards, fname)
                    t = self.typeof(value, env)
                    g = self._guard_of_call(value, env)
                    for target in targets:
                        key = _key(target)
                        if key is None:
                            self._expr(target, env, gvars, guards, fname)
                            continue
                        if isinstance(target, ast.Attribute):
                            self._expr(target.value, env, gvars, guards, fname)
                            owner = self._owner(self.typeof(target.value, env))
                            if owner:
                                self._use(owner, target.attr, target, fname, guards)
                        if t is not None:
                            (env if isinstance(target, ast.Name) else self.attr_types)[key] = t
                        if isinstance(target, ast.Name):
                            value = self._inline(value)
                            if g is not None and isinstance(value, ast.Call) and value.func.id == "getattr":
                                gvars[key] = (True, {g})  # present when not None
                            elif (isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)):
                                pairs = self.guards_in(value.operand, env, gvars, True)
                                if pairs:
                                    gvars[key] = (False, pairs)  # true means absent
                    if isinstance(value, ast.Dict) and len(targets) == 1 and _key(targets[0]) in KEYED_BY_ENUM:
                        enum = KEYED_BY_ENUM[_key(targets[0])]
                        for k in value.keys:
                            if isinstance(k, ast.Constant):
                                self._use(enum, k.value, k, fname, guards)
                continue
            if isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                for name, val in ast.iter_fields(stmt):
                    if isinstance(val, ast.AST):
                        self._expr(val, env, gvars, guards, fname)
                    elif isinstance(val, list) and val and isinstance(val[0], ast.withitem):
                        for item in val:
                            self._expr(item.context_expr, env, gvars, guards, fname)
                for part in ("body", "orelse", "finalbody"):
                    self._block(getattr(stmt, part, []) or [], env, gvars, guards, fname)
                for h in getattr(stmt, "handlers", []) or []:
                    self._block(h.body, env, gvars, guards, fname)
                continue
            self._expr(stmt, env, gvars, guards, fname)

    def _inline(self, value: ast.AST) -> ast.AST:
        """A call of a wrapper function whose body is one ``return EXPR`` (after its docstring): EXPR, so that
        ``typed = strongly_typed(trt)`` is seen as the ``not hasattr(trt.BuilderFlag, "FP16")`` it returns."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in self.funcs:
            body = [s for s in self.funcs[value.func.id].body
                    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                return body[0].value
        return value

    def _function(self, node: ast.FunctionDef, env: dict, gvars: dict, guards: frozenset, fname: str) -> None:
        local = dict(env)
        for a in node.args.args + node.args.kwonlyargs:
            t = self.param_types.get((node.name, a.arg))
            if t is not None and t != ("mixed",):
                local[a.arg] = t
            elif a.arg in local and a.arg != "trt":
                del local[a.arg]
        entry = self.entry_guards.get(node.name)
        self._block(node.body, local, dict(gvars), frozenset(guards | (entry or frozenset())), fname)

    def _expr(self, node: ast.AST, env: dict, gvars: dict, guards: frozenset, fname: str) -> None:
        if node is None:
            return
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            g = guards
            for v in node.values:
                self._expr(v, env, gvars, g, fname)
                g = frozenset(g | self.guards_in(v, env, gvars, True))
            return
        if isinstance(node, (ast.Lambda, ast.FunctionDef)):
            return
        if isinstance(node, ast.Attribute):
            owner = self._owner(self.typeof(node.value, env))
            if owner:
                self._use(owner, node.attr, node, fname, guards)
        elif isinstance(node, ast.Call):
            g = self._guard_of_call(node, env)
            if g:
                self._use(g[0], g[1], node, fname, guards, self_guard=True)
            fn = node.func
            called = None  # a wrapper function: `f(...)`, or `trt_precision.f(...)` through its module
            if isinstance(fn, ast.Name):
                called = fn.id
            elif isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) and fn.value.id in self.modules:
                called = fn.attr
            if called in self.funcs:
                target = self.funcs[called]
                params = [a.arg for a in target.args.args]
                bound = list(zip(params, node.args)) + [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
                for p, arg in bound:
                    t = self.typeof(arg, env)
                    if t is not None:
                        # a parameter given different TensorRT types at different call sites gets none
                        seen = self.param_types.setdefault((called, p), t)
                        if seen != t:
                            self.param_types[(called, p)] = ("mixed",)
                self.call_guards.setdefault(called, []).append(guards)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            left, right = node.left, node.comparators[0]
            if (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id in _ENUM_NAME_FUNCS
                    and left.args and isinstance(right, ast.Constant) and isinstance(right.value, str)):
                t = self.typeof(left.args[0], env)
                if t and t[0] == "inst" and self.stubs.classes.get(t[1], StubClass("")).is_enum:
                    self._use(t[1], right.value, right, fname, guards)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.expr, ast.comprehension, ast.keyword, ast.stmt)):
                if isinstance(child, ast.stmt):
                    self._block([child], env, gvars, guards, fname)
                else:
                    self._expr(child, env, gvars, guards, fname)


@dataclass(frozen=True)
class Name:
    """One TensorRT name and every place the wrapper uses it."""

    owner: str
    name: str
    uses: tuple[Use, ...]

    @property
    def qualname(self) -> str:
        return self.uses[0].qualname

    @property
    def where(self) -> str:
        return ", ".join(sorted({u.where for u in self.uses}))


def collect(source_dir: Path, stubs: Stubs) -> list[Name]:
    """Every TensorRT name the wrapper's modules in ``source_dir`` use (see the module docstring), module names
    first."""
    files = sorted({p for pattern in WRAPPER_GLOB for p in Path(source_dir).glob(pattern)})
    trees = {p.name: ast.parse(p.read_text()) for p in files}
    by_name: dict[tuple[str, str], list[Use]] = {}
    for u in _Collector(stubs, trees).run():
        by_name.setdefault((u.owner, u.name), []).append(u)
    names = [Name(o, n, tuple(sorted(us, key=lambda u: u.where))) for (o, n), us in by_name.items()]
    return sorted(names, key=lambda n: (n.owner != MODULE, n.owner, n.name))


# ==============================================================================================================
# Evidence: where each version has a name
# ==============================================================================================================
PRESENT, TAIL, ABSENT = "yes", "yes (tail)", "no"


def binary_names(so_path: Path) -> tuple[set[str], bytes]:
    """The identifiers stored as whole NUL-terminated strings in a compiled bindings library, and its bytes."""
    data = Path(so_path).read_bytes()
    whole = {m.decode() for m in re.findall(rb"(?<=\x00)[A-Za-z_][A-Za-z0-9_]*(?=\x00)", data)}
    return whole, data


def binary_evidence(name: str, whole: set[str], data: bytes) -> str:
    """"yes": ``name`` is a whole string in the library; "yes (tail)": only the end of a longer string (the linker
    merges "Builder" into "IBuilder"; weak: "INT8" is also the end of "UINT8"); "no": nowhere."""
    if name in whole:
        return PRESENT
    return TAIL if name.encode() + b"\x00" in data else ABSENT


VERDICTS = ("ok", "guarded", "not reached", "MISSING")  # best to worst


def verdict(name: Name, has) -> str:
    """How the wrapper fares with one TensorRT for one name: the worst over its uses of "ok" (present),
    "guarded" (absent, read through hasattr/getattr), "not reached" (absent, and so is a guard of the code using it)
    or "MISSING" (absent and used unguarded: an AttributeError there).

    ``has(owner, name)`` -> True/False (None: no evidence, counted as present); a guard ("flavour", f) is met when
    ``has("flavour", f)`` is True.
    """
    if has(name.owner, name.name) is not False:
        return "ok"
    worst = 0
    for use in name.uses:
        v = 1 if use.self_guard else (2 if any(has(o, n) is False for o, n in use.guards) else 3)
        worst = max(worst, v)
    return VERDICTS[worst]


__all__ = ["ABSENT", "MODULE", "Name", "PRESENT", "Stubs", "TAIL", "Use", "VERDICTS", "WRAPPER_GLOB",
           "binary_evidence", "binary_names", "collect", "verdict"]
