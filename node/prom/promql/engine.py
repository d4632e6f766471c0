"""Evaluating a parsed PromQL expression over all of a query's steps at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import promql_parser as pp

from gnomon.errors import InvalidArgument
from node.prom.labels import METRIC_NAME
from node.prom.promql import aggregations, binary, functions, range_functions, selectors
from node.prom.promql.selectors import Context
from node.prom.promql.values import RangeSamples, Scalar, String, Value, Vector
from node.prom.series import MatchOp, RunSql


def parse(query: str) -> Any:
    try:
        return pp.parse(query)
    except (ValueError, TypeError) as e:
        raise InvalidArgument(f"invalid PromQL expression: {e}") from None


def _name(enum_value: Any) -> str:
    return str(enum_value).rsplit(".", 1)[-1]


class Evaluator:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.steps = len(ctx.steps)

    def eval(self, expr: Any) -> Value:
        if isinstance(expr, pp.NumberLiteral):
            return Scalar(np.full(self.steps, float(expr.val)))
        if isinstance(expr, pp.StringLiteral):
            return String(str(expr.val))
        if isinstance(expr, pp.ParenExpr):
            return self.eval(expr.expr)
        if isinstance(expr, pp.UnaryExpr):
            return self._negate(self.eval(expr.expr))
        if isinstance(expr, pp.VectorSelector):
            return selectors.instant(self.ctx, expr)
        if isinstance(expr, pp.MatrixSelector | pp.SubqueryExpr):
            return self._raw_range(expr)
        if isinstance(expr, pp.Call):
            return self._call(expr)
        if isinstance(expr, pp.AggregateExpr):
            return self._aggregate(expr)
        if isinstance(expr, pp.BinaryExpr):
            return self._binary(expr)
        raise InvalidArgument(f"PromQL: {type(expr).__name__} is not supported")

    def vector(self, expr: Any) -> Vector:
        value = self.eval(expr)
        if not isinstance(value, Vector):
            raise InvalidArgument(f"PromQL: expected an instant vector, got {expr}")
        return value

    def scalar(self, expr: Any) -> Scalar:
        value = self.eval(expr)
        if not isinstance(value, Scalar):
            raise InvalidArgument(f"PromQL: expected a scalar, got {expr}")
        return value

    def _negate(self, value: Value) -> Value:
        if isinstance(value, Scalar):
            return Scalar(-value.values)
        if isinstance(value, Vector):
            return Vector(value.nameless().labels, -value.values, value.present)
        raise InvalidArgument("PromQL: unary minus applies to scalars and instant vectors")

    def _raw_range(self, expr: Any) -> RangeSamples:
        if self.steps != 1:
            raise InvalidArgument(
                "PromQL: a range vector cannot be graphed: use it in an instant query or "
                "inside a function such as rate()"
            )
        w = self._windows(expr, "a range query")
        samples = [
            (w.timestamps[w.lo[i, 0] : w.hi[i, 0]], w.values[w.lo[i, 0] : w.hi[i, 0]])
            for i in range(len(w.labels))
        ]
        kept = [i for i, (t, _) in enumerate(samples) if len(t)]
        return RangeSamples([w.labels[i] for i in kept], [samples[i] for i in kept])

    def _call(self, call: pp.Call) -> Value:
        name = call.func.name
        args = list(call.args)
        if name in range_functions.RANGE_FUNCTIONS:
            return range_functions.apply(name, self._windows(args[0], name))
        if name == "quantile_over_time":
            q = self.scalar(args[0]).values[0]
            return range_functions.quantile_over_time(float(q), self._windows(args[1], name))
        if name == "predict_linear":
            w = self._windows(args[0], name)
            return range_functions.predict_linear(w, self.scalar(args[1]).values[None, :])
        if name in functions.MATH:
            return functions.math(name, self.vector(args[0]))
        if name == "round":
            to = self.scalar(args[1]).values if len(args) > 1 else np.ones(self.steps)
            return functions.rounded(self.vector(args[0]), to[None, :])
        if name in ("clamp", "clamp_min", "clamp_max"):
            return self._clamp(name, args)
        if name == "scalar":
            return functions.scalar_of(self.vector(args[0]))
        if name == "vector":
            return functions.vector_of(self.scalar(args[0]))
        if name == "time":
            return functions.time_of(self.ctx.steps)
        if name == "timestamp":
            return self._timestamp(args[0])
        if name == "absent":
            return functions.absent(self.vector(args[0]), _absent_labels(args[0]), self.steps)
        if name in functions.CALENDAR:
            now = functions.vector_of(functions.time_of(self.ctx.steps))
            return functions.calendar(name, self.vector(args[0]) if args else now)
        if name in ("sort", "sort_desc"):
            return functions.sorted_by_value(self.vector(args[0]), descending=name == "sort_desc")
        if name == "label_join":
            dst, separator, *sources = (self._string(a) for a in args[1:])
            return functions.label_join(self.vector(args[0]), dst, separator, sources)
        if name == "absent_over_time":
            w = self._windows(args[0], name)
            missing = ~np.logical_or.reduce(w.counts > 0, axis=0)
            selector = args[0].vector_selector if isinstance(args[0], pp.MatrixSelector) else None
            labels = _absent_labels(selector)
            return Vector([labels], np.ones((1, self.steps)), missing[None, :]).kept()
        if name == "label_replace":
            dst, replacement, src, regex = (self._string(a) for a in args[1:])
            return functions.label_replace(self.vector(args[0]), dst, replacement, src, regex)
        if name == "histogram_quantile":
            q = self.scalar(args[0]).values
            return functions.histogram_quantile(q, self.vector(args[1]))
        raise InvalidArgument(f"PromQL: function {name}() is not supported")

    def _clamp(self, name: str, args: list[Any]) -> Vector:
        v = self.vector(args[0])
        low = np.full(self.steps, -np.inf)
        high = np.full(self.steps, np.inf)
        if name == "clamp":
            low, high = self.scalar(args[1]).values, self.scalar(args[2]).values
        elif name == "clamp_min":
            low = self.scalar(args[1]).values
        else:
            high = self.scalar(args[1]).values
        return functions.clamped(v, low[None, :], high[None, :])

    def _timestamp(self, arg: Any) -> Vector:
        if isinstance(arg, pp.VectorSelector):
            return selectors.instant(self.ctx, arg, sample_times=True).nameless()
        v = self.vector(arg)
        steps = np.broadcast_to(self.ctx.steps / 1000, v.values.shape)
        return Vector(v.nameless().labels, steps.copy(), v.present)

    def _string(self, expr: Any) -> str:
        value = self.eval(expr)
        if not isinstance(value, String):
            raise InvalidArgument(f"PromQL: expected a string, got {expr}")
        return value.value

    def _windows(self, expr: Any, name: str) -> selectors.Windows:
        if isinstance(expr, pp.SubqueryExpr):
            return self._subquery(expr)
        if not isinstance(expr, pp.MatrixSelector):
            raise InvalidArgument(f"PromQL: {name}() takes a range vector")
        return selectors.windows(self.ctx, expr)

    def _subquery(self, sq: pp.SubqueryExpr) -> selectors.Windows:
        times, steps, range_ms = selectors.subquery_steps(self.ctx, sq)
        inner = Evaluator(Context(self.ctx.run, steps, self.ctx.start_ms, self.ctx.end_ms))
        value = inner.eval(sq.expr)
        if isinstance(value, Scalar):
            value = functions.vector_of(value)
        if not isinstance(value, Vector):
            raise InvalidArgument("PromQL: a subquery takes a scalar or an instant vector")
        return selectors.vector_windows(value, steps, times, range_ms)

    def _aggregate(self, expr: pp.AggregateExpr) -> Vector:
        op = str(expr.op)
        param = None
        if expr.param is not None:
            value = self.eval(expr.param)
            if isinstance(value, String):
                param = value.value
            elif isinstance(value, Scalar):
                param = value.values[0]
            else:
                raise InvalidArgument(f"PromQL: {op}() takes a scalar or string parameter")
        v = self.vector(expr.expr)
        modifier = expr.modifier
        without = modifier is not None and _name(modifier.type) == "Without"
        names = list(modifier.labels) if modifier is not None else []
        return aggregations.aggregate(op, v, names, without=without, param=param)

    def _binary(self, expr: pp.BinaryExpr) -> Value:
        op = str(expr.op)
        lhs, rhs = self.eval(expr.lhs), self.eval(expr.rhs)
        m = _matching(expr.modifier)
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            return binary.scalars(op, lhs, rhs, bool_=m.bool)
        if isinstance(lhs, Vector) and isinstance(rhs, Scalar):
            return binary.vector_scalar(op, lhs, rhs, swap=False, bool_=m.bool)
        if isinstance(lhs, Scalar) and isinstance(rhs, Vector):
            return binary.vector_scalar(op, rhs, lhs, swap=True, bool_=m.bool)
        if isinstance(lhs, Vector) and isinstance(rhs, Vector):
            return binary.vectors(op, lhs, rhs, m)
        raise InvalidArgument(f"PromQL: operator {op} takes scalars and instant vectors")


def _matching(modifier: Any) -> binary.Matching:
    if modifier is None:
        return binary.Matching()
    card = {"OneToOne": "one", "ManyToOne": "left", "OneToMany": "right", "ManyToMany": "one"}[
        _name(modifier.card)
    ]
    matching = modifier.matching
    on = matching is not None and _name(matching.type) == "Include"
    labels = frozenset(matching.labels) if matching is not None else frozenset()
    return binary.Matching(
        on=on,
        labels=labels,
        card=card,
        include=tuple(modifier.group_labels or ()),
        bool=bool(modifier.return_bool),
    )


def _absent_labels(expr: Any) -> dict[str, str]:
    """absent()'s labels: those its selector sets by equality (bar the metric name)."""
    if not isinstance(expr, pp.VectorSelector):
        return {}
    return {
        m.name: m.value
        for m in selectors.matchers(expr)
        if m.op is MatchOp.EQ and m.name != METRIC_NAME
    }


def evaluate(run: RunSql, query: str, start_ms: int, end_ms: int, step_ms: int) -> Value:
    """``query`` evaluated at start_ms, start_ms + step_ms, ... up to end_ms."""
    steps = np.arange(start_ms, end_ms + 1, step_ms, dtype=np.int64)
    ctx = Context(run, steps, start_ms, end_ms)
    return Evaluator(ctx).eval(parse(query))
