"""ROS 2 parameter files read exactly as rcl reads them, and the node-name matching rclpy applies.

The one reader of parameter YAML for ``python -m vrt_ros.settings.config``, ``detector_node``'s start-up check and the launch
file, so that none of them can disagree with what the node later receives from rcl (``--params-file``):

- **Layout** (rcl_yaml_param_parser): ``<key>: ros__parameters: {...}`` where ``<key>`` is a node name, a
  fully-qualified name (``/robot1/front_detector``), a wildcard (``/**``, ``/**/front_detector``, ``/robot1/*``), or
  namespace levels nested as mappings (``robot1: front_detector: ros__parameters:``, the same as
  ``/robot1/front_detector``). Nested parameter mappings are dotted names (``model: path:`` is ``model.path``).
  Every name token of a key is ``*``, ``**`` or a ROS name (letters, digits, ``_``; not starting with a digit):
  rcl refuses ``/robot*/det``, an empty token (a trailing ``/``, ``//``) and ``-det``. A file may hold several YAML
  documents (``---``): rcl reads them as one, in order (an empty document is an error, as in rcl); aliases
  (``*anchor``) are refused as rcl refuses them.
- **Values** (rcl's rules, not YAML 1.1's): a quoted scalar or one tagged ``!!str`` is a string; otherwise
  ``y/yes/true/on`` and ``n/no/false/off`` (3 spellings each) are bools, what C ``strtoll(s, 0)`` reads whole is an
  int (``010`` is 8, ``0x10`` is 16), what ``strtod`` reads whole is a double (``1e3``, ``inf``, ``.nan``), anything
  else is a string (``~`` and ``null`` too). A sequence must hold one type (bool, int, double or string; ``[0, 0.5]``
  is an error, and so are lists of lists); **an empty sequence ``[]`` is "not set"**: :data:`NOT_SET` (``None``, as rclpy gives it), which the
  schema reads as its default (:func:`vrt_ros.settings.config.validate`).
- **Matching** (rclpy's ``_populate_node_parameters_from_rcl_params``): a key without a leading ``/`` gets one, so a
  bare ``front_detector:`` matches only ``/front_detector`` (a node in the root namespace); ``/**`` matches any
  number of namespace levels and ``/*`` one. Sections apply in file order, later ones winning; several files are
  merged section by section, later files winning (rcl).

Every error is a :class:`~vrt_ros.errors.ConfigError` of one line that names the file and the problem.
Source of the rules: ros2/rcl ``rcl_yaml_param_parser/src/parse.c`` and ros2/rclpy ``src/rclpy/node.cpp`` (jazzy),
checked against rcl by ``test/test_param_files.py``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from vrt_ros.errors import ConfigError

#: The value rcl gives a parameter written as an empty list: not set (the schema default applies).
NOT_SET = None
PARAMS_KEY = "ros__parameters"

_TRUE = ("Y", "y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE = ("N", "n", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
# What C strtoll(s, &end, 0) consumes whole (no leading blanks in a plain YAML scalar).
_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
# What C strtod consumes whole: decimal and hexadecimal floats, inf/infinity/nan (any case).
_DOUBLE = re.compile(
    r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
    r"([pP][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)
_YAML_SPECIAL_DOUBLES = {".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan, ".inf": math.inf, ".Inf": math.inf,
                         ".INF": math.inf, "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf}


@dataclass(frozen=True)
class Section:
    """One ``<node key>: ros__parameters:`` block.

    Attributes:
        key: the node key as rclpy matches it: leading ``/`` added, nested namespace levels joined with ``/``.
        values: dotted parameter name -> bool, int, float, str, list of one of those, or :data:`NOT_SET`.
        file: the file it came from.
    """

    key: str
    values: dict[str, Any] = field(default_factory=dict)
    file: str = ""


def _scalar(node, file: str) -> Any:
    value = node.value
    if node.style in ("'", '"') or getattr(node, "_vrt_explicit_str", False):
        return value
    if value == "":
        raise ConfigError(f"parameter file {file}: line {node.start_mark.line + 1}: a parameter has no value")
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if _INT.fullmatch(value):
        number = int(value, 8) if re.fullmatch(r"[+-]?0[0-7]+", value) else int(value, 0)
        if -(2**63) <= number < 2**63:
            return number
        return float(value)  # strtoll overflows: rcl falls through to strtod
    if value in _YAML_SPECIAL_DOUBLES:
        return _YAML_SPECIAL_DOUBLES[value]
    if _DOUBLE.fullmatch(value):
        return float.fromhex(value) if "x" in value.lower() else float(value)
    return value


def _sequence(node, file: str) -> list[Any] | None:
    import yaml

    items: list[Any] = []
    for child in node.value:
        if isinstance(child, yaml.ScalarNode):
            items.append(_scalar(child, file))
        else:
            raise ConfigError(f"parameter file {file}: line {child.start_mark.line + 1}: a list may hold only values")
    if not items:
        return NOT_SET
    kinds = {type(v) for v in items}
    if len(kinds) > 1:
        names = {bool: "bool", int: "int", float: "double", str: "string"}
        raise ConfigError(
            f"parameter file {file}: line {node.start_mark.line + 1}: a list must hold one type "
            f"(got {' and '.join(sorted(names[k] for k in kinds))}; write 0.0 instead of 0 in a list of doubles)"
        )
    return items


def _params(node, prefix: str, out: dict[str, Any], file: str) -> None:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"parameter file {file}: line {node.start_mark.line + 1}: '{PARAMS_KEY}' must hold a mapping")
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise ConfigError(f"parameter file {file}: line {key_node.start_mark.line + 1}: a parameter name must be text")
        name = f"{prefix}{key_node.value}"
        if isinstance(value_node, yaml.MappingNode):
            _params(value_node, name + ".", out, file)
        elif isinstance(value_node, yaml.SequenceNode):
            out[name] = _sequence(value_node, file)
        else:
            out[name] = _scalar(value_node, file)


#: A name token of a section key (rmw_validate_namespace / rmw_validate_node_name), or a wildcard.
_KEY_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\*\*?")


def _section_key(path: list[str], file: str, line: int) -> str:
    """The key of the node levels ``path`` as rcl joins them (a '/' between levels unless one ends the previous
    level), checked as rcl checks it; returned absolute (rclpy's matching adds the leading '/')."""
    raw = path[0]
    for level in path[1:]:
        raw += level if raw.endswith("/") else "/" + level
    tokens = raw.split("/")
    for token in tokens[1:] if raw.startswith("/") else tokens:
        if not token:
            raise ConfigError(f"parameter file {file}: line {line}: node key '{raw}' has an empty name (a trailing "
                              "'/' or '//'); rcl refuses it")
        if not _KEY_TOKEN.fullmatch(token):
            raise ConfigError(f"parameter file {file}: line {line}: node key '{raw}': '{token}' is neither a ROS name "
                              "(letters, digits, '_'; not starting with a digit) nor a wildcard '*' or '**'; rcl "
                              "refuses it (write '/**/<node name>' for a node in any namespace)")
    return raw if raw.startswith("/") else "/" + raw


def _nodes(node, path: list[str], out: list[Section], file: str) -> None:
    import yaml

    where = f"under '{'/'.join(path)}'" if path else "at the top level"
    if not isinstance(node, yaml.MappingNode) or not node.value:
        raise ConfigError(
            f"parameter file {file}: line {node.start_mark.line + 1}: {where} expected '{PARAMS_KEY}:' or a node "
            f"name, as in '/**: {PARAMS_KEY}: ...'"
        )
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key == PARAMS_KEY:
            if not path:
                raise ConfigError(
                    f"parameter file {file}: '{PARAMS_KEY}:' must sit under a node name, e.g. '/**:' (all nodes) "
                    "or the node's name, indented one level"
                )
            section_key = _section_key(path, file, key_node.start_mark.line + 1)
            values: dict[str, Any] = {}
            _params(value_node, "", values, file)
            out.append(Section(section_key, values, file))
        elif not isinstance(value_node, yaml.MappingNode):
            raise ConfigError(
                f"parameter file {file}: line {key_node.start_mark.line + 1}: '{key}' {where} has a value where "
                f"'<node name>: {PARAMS_KEY}:' is expected (parameters go under e.g. '/**: {PARAMS_KEY}:')"
            )
        else:
            _nodes(value_node, [*path, key], out, file)


def read(path: str | Path) -> list[Section]:
    """Read one parameter file as rcl does.

    Returns:
        Its sections in file order (every YAML document of the file, in order).

    Raises:
        ConfigError: one line naming the file: missing, unreadable, not YAML, an alias, not the ``<node>:
            ros__parameters:`` layout (an empty document included), a node key rcl refuses, a parameter without a
            value, or a list of mixed types.
    """
    import yaml  # PyYAML, for its parser only (values are typed here, as rcl types them)

    file = str(path)
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"parameter file {file} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"parameter file {file} is a directory") from None
    except OSError as e:
        raise ConfigError(f"parameter file {file} cannot be read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"parameter file {file} is not UTF-8 text: {e.reason}") from None
    try:
        documents = list(yaml.compose_all(text, Loader=_loader()))  # an empty file has none: rcl accepts it
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"parameter file {file} is not valid YAML: {where}{problem}") from None
    sections: list[Section] = []
    for root in documents:  # rcl reads the documents of a stream as one
        _nodes(root, [], sections, file)
    return sections


def read_all(paths: Iterable[str | Path]) -> list[Section]:
    """Read several files and merge them as rcl does: one section per key (first appearance order), later wins."""
    merged: dict[str, Section] = {}
    for path in paths:
        for section in read(path):
            if section.key in merged:
                old = merged[section.key]
                merged[section.key] = Section(section.key, {**old.values, **section.values}, old.file)
            else:
                merged[section.key] = section
    return list(merged.values())


def parse_override(text: str) -> tuple[str, Any]:
    """A ``-p NAME:=VALUE`` override, its value typed as rcl types it (the rules above; ``[a, b]`` a list).

    Raises:
        ConfigError: not ``NAME:=VALUE``, or a value rcl refuses (a list of mixed types, an empty value).
    """
    import yaml

    name, sep, value = text.partition(":=")
    if not sep or not name:
        raise ConfigError(f"-p {text!r}: expected NAME:=VALUE, e.g. model.path:=/models/yolox_nano.onnx")
    source = f"-p {name}"
    try:
        node = yaml.compose(value, Loader=_loader())
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: {value!r} is not a value rcl reads: {str(e).splitlines()[0]}") from None
    if isinstance(node, yaml.SequenceNode):
        return name, _sequence(node, source)
    if node is None or not isinstance(node, yaml.ScalarNode):
        raise ConfigError(f"{source}: {value!r} is not a value (a bool, number, string or list of one of those)")
    return name, _scalar(node, source)


def key_matches(key: str, node_fqn: str) -> bool:
    """Whether a section key applies to the node whose fully-qualified name is ``node_fqn`` (rclpy's rule)."""
    if not key.startswith("/"):
        key = "/" + key
    pattern = re.escape(key).replace(r"/\*\*", r"(/\w+)*").replace(r"/\*", r"(/\w+)")
    return re.fullmatch(pattern, node_fqn) is not None


def values_for(sections: Sequence[Section], node_fqn: str) -> dict[str, Any]:
    """The parameter values rcl gives the node ``node_fqn``: matching sections in order, later ones winning."""
    out: dict[str, Any] = {}
    for section in sections:
        if key_matches(section.key, node_fqn):
            out.update(section.values)
    return out


def unmatched(sections: Sequence[Section], node_fqns: Sequence[str]) -> list[Section]:
    """The sections that apply to none of ``node_fqns``."""
    return [s for s in sections if not any(key_matches(s.key, n) for n in node_fqns)]


def unmatched_hint(section: Section, node_fqns: Sequence[str]) -> str:
    """One line saying that ``section`` applies to no node, and how to key it."""
    name = section.key.rstrip("/").rsplit("/", 1)[-1]
    fixes = [n for n in node_fqns if n.rsplit("/", 1)[-1] == name]
    hint = (f"write '/**/{name}:' (that name in any namespace) or '{fixes[0]}:'" if fixes
            else "use '/**/<node name>:' for one node in any namespace or '/**:' for all")
    return (f"parameter file {section.file}: section '{section.key}' applies to none of this process's nodes "
            f"({', '.join(node_fqns)}); its parameters are ignored: {hint}")


def no_node_hint(file: str, sections: Sequence[Section], node_fqns: Sequence[str]) -> str:
    """One line saying that none of ``file``'s ``sections`` applies to the nodes ``node_fqns``, naming the sections,
    the nodes and the fix (the closest section name to a node's, when one is close: a misspelling)."""
    import difflib

    keys = [s.key for s in sections]
    names = [n.rsplit("/", 1)[-1] for n in node_fqns]
    close = [(k, n) for k in keys for n in names
             if difflib.get_close_matches(k.rstrip("/").rsplit("/", 1)[-1], [n], n=1, cutoff=0.75)]
    fix = (f"'{close[0][0]}' is not '{close[0][1]}': write '/**/{close[0][1]}:'" if close
           else f"key a section by the node's name ('/**/{names[0]}:' in any namespace) or '/**:' for every node")
    return (f"parameter file {file} applies to none of this process's nodes ({', '.join(node_fqns)}): its sections "
            f"({', '.join(keys)}) match no node's name, so its parameters are ignored and the node starts on its "
            f"defaults; {fix}")


_LOADER = None


def _loader():
    """A SafeLoader that remembers which scalars carry an explicit ``!!str`` tag (rcl honours it) and refuses
    aliases (rcl: "Will not support aliasing")."""
    global _LOADER
    if _LOADER is None:
        import yaml

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise yaml.composer.ComposerError(None, None, f"alias '*{event.anchor}': rcl does not support "
                                                  "aliases; write the value out", event.start_mark)
            explicit = isinstance(event, yaml.ScalarEvent) and event.tag in ("tag:yaml.org,2002:str", "!!str")
            node = yaml.SafeLoader.compose_node(self, parent, index)
            if explicit and isinstance(node, yaml.ScalarNode):
                node._vrt_explicit_str = True
            return node

        _LOADER = type("RclParamsLoader", (yaml.SafeLoader,), {"compose_node": compose_node})
    return _LOADER
