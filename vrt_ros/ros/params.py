"""ROS parameters of the detector node, declared from the schema in :mod:`vrt_ros.settings.config`.

Every parameter gets a ``ParameterDescriptor`` with its description (choices appended), ``read_only`` for model,
engine, input and backend parameters, and an integer or floating-point range where the schema has one. Values
from parameter files and overrides are validated by the schema (:func:`vrt_ros.settings.config.check_value`), so a bad
value fails start-up with a :class:`~vrt_ros.errors.ConfigError` naming the parameter; an unknown parameter for
this node is an error too.

Integers are accepted where doubles are meant, in files and at run time (a YAML ``score_threshold: 1`` is
``1.0``): overrides are converted before declaration and a pre-set callback converts runtime values, because rclpy
would otherwise reject them as the wrong type.

At run time, read-only parameters are refused by rclpy with a reason; every other change is validated by the
schema (refused with a reason naming the parameter) and then handed to the node's ``on_change`` callback, which
applies it on the next frame.

A managed node passes ``read_only_reason``: its read-only parameters are then declared writable and refused by the
schema check only while that callable gives a reason (the node is configured), so they can be fixed while it is
unconfigured.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from vrt_ros.errors import ConfigError
from vrt_ros.settings import config
from vrt_ros.settings.config import PARAMS, ParamSpec

#: Schema type → (rcl parameter type, rclpy Parameter.Type).
_TYPES: dict[str, tuple[int, Parameter.Type]] = {
    "bool": (ParameterType.PARAMETER_BOOL, Parameter.Type.BOOL),
    "int": (ParameterType.PARAMETER_INTEGER, Parameter.Type.INTEGER),
    "double": (ParameterType.PARAMETER_DOUBLE, Parameter.Type.DOUBLE),
    "string": (ParameterType.PARAMETER_STRING, Parameter.Type.STRING),
    "int_array": (ParameterType.PARAMETER_INTEGER_ARRAY, Parameter.Type.INTEGER_ARRAY),
    "double_array": (ParameterType.PARAMETER_DOUBLE_ARRAY, Parameter.Type.DOUBLE_ARRAY),
    "string_array": (ParameterType.PARAMETER_STRING_ARRAY, Parameter.Type.STRING_ARRAY),
}

#: Parameters rclpy itself declares or reads on every node; not ours to reject.
_RCLPY_PARAMS = ("use_sim_time", "start_type_description_service")
_RCLPY_PREFIXES = ("qos_overrides.",)


def descriptor(spec: ParamSpec, managed: bool = False) -> ParameterDescriptor:
    """The ROS descriptor of one schema entry (type, description, read-only flag, numeric range).

    ``managed``: for a managed node, a read-only parameter is declared writable (the node refuses changes while
    it is configured) and its description says so.
    """
    ros_type, _ = _TYPES[spec.type]
    text = spec.description
    if spec.choices is not None:
        choices = ", ".join(repr(c) for c in spec.choices)
        text = f"{text} (one of {choices})"
    if managed and spec.read_only:
        text = f"{text} [changes only while the node is unconfigured]"
    # Runtime-changeable parameters are dynamically typed so that a wrong type reaches our validation, whose
    # refusal names the parameter (rclpy's own type check says only "Wrong parameter type").
    d = ParameterDescriptor(
        name=spec.name, type=ros_type, description=text, read_only=spec.read_only and not managed,
        dynamic_typing=not spec.read_only,
    )
    if spec.choices is not None:
        d.additional_constraints = f"one of: {', '.join(repr(c) for c in spec.choices)}"
    if spec.length is not None:
        d.additional_constraints = f"{' or '.join(map(str, spec.length))} elements, each in [{spec.min:g}, {spec.max:g}]"
    if spec.min is not None and spec.max is not None:
        if spec.type == "int":
            d.integer_range = [IntegerRange(from_value=int(spec.min), to_value=int(spec.max), step=1)]
        elif spec.type == "double":
            d.floating_point_range = [FloatingPointRange(from_value=float(spec.min), to_value=float(spec.max), step=0.0)]
    return d


def _coerce(spec: ParamSpec, param: Parameter) -> Parameter:
    """Integers → doubles for double and double-array parameters; anything else unchanged."""
    value = param.value
    if spec.type == "double" and isinstance(value, int) and not isinstance(value, bool):
        return Parameter(param.name, Parameter.Type.DOUBLE, float(value))
    if spec.type == "double_array" and param.type_ == Parameter.Type.INTEGER_ARRAY:
        return Parameter(param.name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in value])
    if spec.type in ("int_array", "double_array", "string_array") and isinstance(value, (list, tuple)) and len(value) == 0:
        return Parameter(param.name, _TYPES[spec.type][1], [])
    return param


def _plain(value: Any) -> Any:
    """rclpy array values (array.array / numpy) → lists; scalars unchanged."""
    if isinstance(value, (str, bytes, bool, int, float)) or value is None:
        return value
    return list(value)


class NodeParameters:
    """Declares the schema's parameters on ``node`` and validates changes.

    Args:
        node: the node (already constructed with its overrides: ``parameter_overrides``, ``--params-file``).
        on_change: called with ``{name: new value}`` (validated, normalised) after a runtime change is accepted.
        read_only_reason: for a managed node: returns why the schema's read-only parameters cannot change now
            (e.g. ``"active"``), or None while they can; None (the default): they are read-only for the node's life.

    Attributes:
        values: the current validated values, dotted names (see :func:`vrt_ros.settings.config.validate`).

    Raises:
        ConfigError: a parameter value or an unknown parameter for this node; names the parameter and the node.
    """

    def __init__(
        self,
        node: Node,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        read_only_reason: Callable[[], str | None] | None = None,
    ) -> None:
        self._node = node
        self._on_change = on_change
        self._read_only_reason = read_only_reason
        self._source = f"parameters of node {node.get_fully_qualified_name()}"
        self._check_overrides()
        raw: dict[str, Any] = {}
        for spec in PARAMS:
            _, ptype = _TYPES[spec.type]
            default = spec.default
            # An empty list cannot carry its element type in rclpy: declare typed, unset, and use the schema default.
            value = ptype if isinstance(default, list) and not default else default
            try:
                param = node.declare_parameter(spec.name, value, descriptor(spec, managed=read_only_reason is not None))
            except Exception as exc:  # rclpy: InvalidParameterTypeException, InvalidParameterValueException
                raise ConfigError(f"{self._source}: parameter '{spec.name}': {exc}") from exc
            if param.type_ != Parameter.Type.NOT_SET:
                raw[spec.name] = _plain(param.value)
        self.values = config.validate(raw, self._source)
        # Pre- and post-set callbacks exist from ROS 2 Iron on. On Humble, ints stay ints in rclpy's store for
        # runtime changes (the validated values are floats all the same) and changes are applied on acceptance.
        self._has_post_set = hasattr(node, "add_post_set_parameters_callback")
        if hasattr(node, "add_pre_set_parameters_callback"):
            node.add_pre_set_parameters_callback(self._pre_set)
        node.add_on_set_parameters_callback(self._on_set)
        if self._has_post_set:
            node.add_post_set_parameters_callback(self._post_set)

    def _check_overrides(self) -> None:
        """Validate every override (files and ``-p``) against the schema before declaration, reporting all faults.

        The overrides go through :func:`vrt_ros.settings.config.validate`, the same code that checks a parameter file
        (``python -m vrt_ros.settings.config``), so the two cannot disagree. An override rcl reports as not set (what it makes
        of an empty list ``[]`` in a parameter file) is removed, so the parameter keeps its schema default. Ints are
        converted to doubles where the schema wants doubles. Unknown names, wrong types and out-of-range values all
        raise one :class:`ConfigError` listing each (our wording, naming the parameter), instead of rclpy's
        first-failure message.
        """
        # rclpy keeps overrides in this private dict (no public API); it is read by declare_parameter.
        overrides: dict[str, Parameter] = getattr(self._node, "_parameter_overrides", {})
        plain: dict[str, Any] = {}
        for name in sorted(overrides):
            if name in _RCLPY_PARAMS or name.startswith(_RCLPY_PREFIXES):
                continue
            if name in config.SCHEMA and overrides[name].type_ == Parameter.Type.NOT_SET:
                del overrides[name]  # `[]` in a file: declared unset below, the schema default applies
                continue
            if name in config.SCHEMA:
                overrides[name] = _coerce(config.SCHEMA[name], overrides[name])
            plain[name] = _plain(overrides[name].value)
        config.validate(plain, self._source)

    def _pre_set(self, params: list[Parameter]) -> list[Parameter]:
        return [_coerce(config.SCHEMA[p.name], p) if p.name in config.SCHEMA else p for p in params]

    def _on_set(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            if p.name not in config.SCHEMA:
                continue
            locked = self._read_only_reason() if self._read_only_reason and config.SCHEMA[p.name].read_only else None
            if locked:
                return SetParametersResult(
                    successful=False,
                    reason=f"parameter '{p.name}' can change only while the node is unconfigured (it is {locked}): "
                    "deactivate and clean it up first",
                )
            try:
                config.check_value(p.name, _plain(p.value), "set_parameters")
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        if not self._has_post_set:
            self._post_set(params)
        return SetParametersResult(successful=True)

    def _post_set(self, params: list[Parameter]) -> None:
        changed = {}
        for p in params:
            if p.name in config.SCHEMA:
                changed[p.name] = config.check_value(p.name, _plain(p.value), "set_parameters")
        if changed:
            self.values = {**self.values, **changed}
            if self._on_change is not None:
                self._on_change(changed)

    def snapshot(self) -> Mapping[str, Any]:
        """A copy of the current values."""
        return dict(self.values)
