"""One-row reads and writes of a chat turn's path, in plain SQL.

Why: the ORM spends far more CPU building a statement than the database spends running it.
`DATABASE_URL=postgres://… .venv/bin/python bench/row_sql.py` printed, in this process's CPU per
statement: an UPDATE of fourteen increments 1.73 ms through QuerySet.update against 0.23 ms here; a
locked read of six columns of one row 0.59 ms through `values_list` against 0.14 ms. A turn runs a
dozen such statements. These helpers
write the same SQL the ORM would for the simple shapes a turn needs, cache each shape's text, and
prepare every value through its model field (`get_db_prep_save`), so dates, decimals and JSON are
stored exactly as the ORM stores them on either database.

Anything more than "one table, equality and range filters, set / add / max / min" stays in the ORM.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model

_COMPARE = {"": "=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
# Two-argument max/min: PostgreSQL's GREATEST/LEAST; SQLite's scalar max()/min().
_HIGH = {"postgresql": "GREATEST", "sqlite": "MAX"}
_LOW = {"postgresql": "LEAST", "sqlite": "MIN"}


def _field(model: type[Model], name: str) -> Field:
    return model._meta.get_field(name)  # type: ignore[return-value]


def _column(model: type[Model], name: str) -> str:
    return connection.ops.quote_name(str(_field(model, name).column))


def _where(model: type[Model], keys: tuple[str, ...]) -> str:
    parts = []
    for key in keys:
        name, _, op = key.partition("__")
        parts.append(f"{_column(model, name)} {_COMPARE[op]} %s")
    return " AND ".join(parts)


@lru_cache(maxsize=256)
def _update_sql(model: type[Model], vendor: str, where: tuple[str, ...], assign: tuple[str, ...],
                add: tuple[str, ...], high: tuple[str, ...], low: tuple[str, ...]) -> str:
    sets = [f"{_column(model, n)} = %s" for n in assign]
    sets += [f"{_column(model, n)} = {_column(model, n)} + %s" for n in add]
    # COALESCE: a NULL column takes the value (GREATEST ignores NULLs but SQLite's max() returns NULL).
    sets += [f"{_column(model, n)} = {_HIGH[vendor]}(COALESCE({_column(model, n)}, %s), %s)" for n in high]
    sets += [f"{_column(model, n)} = {_LOW[vendor]}(COALESCE({_column(model, n)}, %s), %s)" for n in low]
    table = connection.ops.quote_name(model._meta.db_table)
    return f"UPDATE {table} SET {', '.join(sets)} WHERE {_where(model, where)}"  # noqa: S608 - names from the model


Statement = tuple[str, list[Any]]


def _db() -> Any:
    # The wrapper `connection` stands for, looked up once per statement: through the proxy, each of a
    # statement's values paid that lookup again, in every attribute the field's preparation reads.
    return connections[DEFAULT_DB_ALIAS]


def _prep(model: type[Model], name: str, value: Any, db: Any) -> Any:
    if value is None:
        return None
    return _field(model, name).get_db_prep_save(value, db)


def row_update(model: type[Model], *, where: Mapping[str, Any], **changes: Mapping[str, Any] | None) -> int:
    """UPDATE `model`'s rows matching `where` (field name, optionally `__lt/__lte/__gt/__gte`) with
    `changes` as `row_update_statement` takes them. Returns the number of rows changed."""
    sql, params = row_update_statement(model, where=where, **changes)
    with _db().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def row_update_statement(
    model: type[Model],
    *,
    where: Mapping[str, Any],
    assign: Mapping[str, Any] | None = None,
    add: Mapping[str, Any] | None = None,
    high: Mapping[str, Any] | None = None,
    low: Mapping[str, Any] | None = None,
) -> Statement:
    """The UPDATE of `model`'s rows matching `where` as (sql, params), for `row_update` or to run with
    others in one round trip (`statements_run`): `assign` sets, `add` increments, `high`/`low` keep
    the larger/smaller of the column and the value. Like QuerySet.update, auto_now fields are not touched."""
    assign, add, high, low = assign or {}, add or {}, high or {}, low or {}
    if not (assign or add or high or low):
        raise ValueError("row_update needs something to set")
    db = _db()
    sql = _update_sql(model, db.vendor, tuple(where), tuple(assign), tuple(add), tuple(high), tuple(low))
    params = [_prep(model, name.partition("__")[0], value, db) for name, value in assign.items()]
    params += [_prep(model, name, value, db) for name, value in add.items()]
    for name, value in (*high.items(), *low.items()):
        prepared = _prep(model, name, value, db)
        params += [prepared, prepared]
    params += [_prep(model, key.partition("__")[0], value, db) for key, value in where.items()]
    return sql, params


@lru_cache(maxsize=256)
def _select_sql(model: type[Model], vendor: str, where: tuple[str, ...], fields: tuple[str, ...], lock: bool) -> str:
    columns = ", ".join(_column(model, n) for n in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"SELECT {columns} FROM {table} WHERE {_where(model, where)}"  # noqa: S608 - names from the model
    # SQLite has no row locks: its transactions take the database's write lock (IMMEDIATE) instead.
    return sql + " LIMIT 1" + (" FOR UPDATE" if lock and vendor == "postgresql" else "")


def row_read(
    model: type[Model], *, where: Mapping[str, Any], fields: tuple[str, ...], lock: bool = False
) -> dict[str, Any] | None:
    """One row's `fields` as the ORM would load them (None: no row); `lock` reads it FOR UPDATE."""
    db = _db()
    sql = _select_sql(model, db.vendor, tuple(where), fields, lock)
    params = [_prep(model, key.partition("__")[0], value, db) for key, value in where.items()]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    out = {}
    for name, value in zip(fields, row, strict=True):
        if value is not None:
            col, converters = _converters(model, name, db.vendor)
            for converter in converters:
                value = converter(value, col, db)
        out[name] = value
    return out


@lru_cache(maxsize=512)
def _converters(model: type[Model], name: str, vendor: str) -> tuple[Any, tuple[Any, ...]]:
    """The column's expression and what the ORM applies to its value as it loads it (the backend's,
    then the field's): worked out once, as a read runs on every turn for each of its columns."""
    col = _field(model, name).get_col(model._meta.db_table)
    return col, (*connection.ops.get_db_converters(col), *col.get_db_converters(connection))


def row_instance(model: type[Model], *, where: Mapping[str, Any]) -> Model | None:
    """One row as a model instance, loaded as the ORM loads one (`from_db`: saving it updates that row)."""
    names = tuple(field.attname for field in model._meta.concrete_fields)
    row = row_read(model, where=where, fields=names)
    if row is None:
        return None
    return model.from_db(connection.alias, list(names), [row[name] for name in names])


@lru_cache(maxsize=64)
def _insert_sql(model: type[Model], vendor: str, names: tuple[str, ...]) -> str:
    columns = ", ".join(_column(model, n) for n in names)
    table = connection.ops.quote_name(model._meta.db_table)
    return f"INSERT INTO {table} ({columns}) VALUES ({', '.join('%s' for _ in names)})"  # noqa: S608 - names from the model



@lru_cache(maxsize=64)
def _create_plan(model: type[Model], vendor: str, returning: bool) -> tuple[str, tuple[Field, ...]]:
    """The INSERT of every concrete column but the automatic key, and the fields in its order."""
    fields = tuple(f for f in model._meta.local_concrete_fields if f is not model._meta.auto_field)
    sql = _insert_sql(model, vendor, tuple(f.name for f in fields))
    if returning:
        sql += f" RETURNING {_column(model, model._meta.pk.name)}"
    return sql, fields


M = TypeVar("M", bound=Model)


def row_create(model: type[M], /, **values: Any) -> M:
    """`model.objects.create(**values)` for the models a turn creates, without the ORM's statement
    compiler (most of a create's CPU, the row's own insert a small part of it).

    The same row: the instance is built by the model (defaults), each field fills itself in as on a
    save (`pre_save`: auto_now_add) and is prepared as the ORM prepares it; the key comes back from
    the INSERT. Only for models whose `save()` is Django's and that no pre_save/post_save receiver
    listens to (a test checks the models this is used on)."""
    obj = model(**values)
    db = _db()
    returning = bool(db.features.can_return_columns_from_insert)
    sql, fields = _create_plan(model, db.vendor, returning)
    params = _create_params(obj, fields, db)
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        pk = cursor.fetchone()[0] if returning else db.ops.last_insert_id(cursor, model._meta.db_table,
                                                                          model._meta.pk.column)
    return row_created(obj, pk=pk)


def _create_params(obj: Model, fields: tuple[Field, ...], db: Any) -> list[Any]:
    return [f.get_db_prep_save(f.pre_save(obj, True), db) for f in fields]


def row_create_parts(model: type[M], /, **values: Any) -> tuple[M, list[tuple[str, Any]]]:
    """The instance `row_create` would insert and its (quoted column, prepared value) pairs, in the
    INSERT's order, for an insert written into a larger statement (`turn_claim.send_claim_store`);
    the caller sets the key it gets back."""
    obj = model(**values)
    db = _db()
    _, fields = _create_plan(model, db.vendor, False)
    return obj, list(zip(_create_columns(model), _create_params(obj, fields, db), strict=True))


@lru_cache(maxsize=64)
def _create_columns(model: type[Model]) -> tuple[str, ...]:
    _, fields = _create_plan(model, connection.vendor, False)
    return tuple(_column(model, f.name) for f in fields)


def row_created(obj: M, *, pk: int) -> M:
    """`obj`, inserted elsewhere with key `pk`, marked as a saved row (as `row_create` leaves it)."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = _db().alias
    return obj


def row_insert_statement(model: type[Model], *, values: Mapping[str, Any]) -> Statement:
    """The INSERT of one row of exactly `values` (every column without a database default must be
    given; model defaults are not applied), as (sql, params)."""
    db = _db()
    sql = _insert_sql(model, db.vendor, tuple(values))
    return sql, [_prep(model, name, value, db) for name, value in values.items()]


def statements_run(statements: list[Statement]) -> int:
    """Run writes that need nothing back and do not read each other's rows (other tables, or rows
    none of the others touches). PostgreSQL: in one round trip, all but the last as data-modifying
    WITH clauses (one snapshot, so none sees another's effect: hence the rule). SQLite has no
    data-modifying WITH: one by one. Returns the rows the last statement changed (PostgreSQL counts
    the main statement's), so that one whose count decides a next step can close the list."""
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql" or len(statements) == 1:
            for sql, params in statements:
                cursor.execute(sql, params)
            return cursor.rowcount
        *first, (last_sql, _) = statements
        sql = "WITH " + ", ".join(f"w{i} AS ({s})" for i, (s, _) in enumerate(first)) + " " + last_sql
        cursor.execute(sql, [p for _, params in statements for p in params])
        return cursor.rowcount


class CompiledQuery:
    """An ORM query compiled once per shape, then run again with other values, in plain SQL.

    For a read whose conditions are too many for the helpers above (ORs of index ranges), or a
    lookup with a join on every request, which the ORM must go on stating: `build(shape, **values)`
    returns the QuerySet, using each value only as a parameter; what else it chooses (a condition
    present or not) comes from `shape`, which must say all of it. The first call of a shape builds it
    with marker values and notes where each lands among the SQL's parameters; later calls swap their
    values in and skip building and compiling (most of such a read's CPU).

    `rows` returns the rows of a `values_list` as the driver gives them: no field converters (a
    boolean is 0/1 on SQLite). `instances` returns model instances built as the ORM builds them: the
    same converters, `from_db`, and `select_related` objects attached by the ORM's own populators.
    """

    _MARK = -7_300_000_000  # a value no row id takes

    def __init__(self, build: Any) -> None:
        self.build = build
        self._shapes: dict[tuple[str, Any], _Compiled] = {}

    def _compiled(self, shape: Any, values: Mapping[str, int | str]) -> tuple[_Compiled, list[Any]]:
        key = (connection.vendor, shape)
        compiled = self._shapes.get(key)
        if compiled is None:
            # A marker of the value's own type: ids are numbers, API token keys are text.
            marks: dict[str, int | str] = {
                name: self._MARK - k if isinstance(values[name], int) else f"\x00mark{k}\x00"
                for k, name in enumerate(sorted(values))
            }
            compiler = self.build(shape, **marks).query.get_compiler(connection.alias)
            sql, params = compiler.as_sql()
            slots = [(i, name) for i, p in enumerate(params) for name, mark in marks.items()
                     if type(p) is type(mark) and p == mark]
            if {name for _, name in slots} != set(marks):
                raise ValueError(f"a value was not used as a parameter: {sorted(set(marks) - {n for _, n in slots})}")
            compiled = self._shapes[key] = _Compiled(sql, list(params), slots, compiler)
        params = list(compiled.params)
        for i, name in compiled.slots:
            params[i] = values[name]
        return compiled, params

    def rows(self, shape: Any, **values: int | str) -> list[tuple[Any, ...]]:
        compiled, params = self._compiled(shape, values)
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            return cursor.fetchall()

    def instances(self, shape: Any, **values: int | str) -> list[Any]:
        compiled, params = self._compiled(shape, values)
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        return compiled.loader().load(rows)


class _Compiled:
    """One shape's SQL, its parameters with the value slots, and (for `instances`) what the ORM's
    ModelIterable derives from the compiler to turn rows into objects, worked out once."""

    def __init__(self, sql: str, params: list[Any], slots: list[tuple[int, str]], compiler: Any) -> None:
        self.sql, self.params, self.slots, self.compiler = sql, params, slots, compiler
        self._loader: _InstanceLoader | None = None

    def loader(self) -> _InstanceLoader:
        if self._loader is None:
            self._loader = _InstanceLoader(self.compiler)
        return self._loader


class _InstanceLoader:
    def __init__(self, compiler: Any) -> None:
        from django.db.models.query import get_related_populators

        select, klass_info = compiler.select, compiler.klass_info
        if compiler.annotation_col_map or klass_info is None:
            raise ValueError("instances() loads plain model queries (no annotations, no values())")
        self.compiler = compiler
        self.model = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [f[0].target.attname for f in select[self.start:self.end]]
        # The stubs describe Django 6 (a fetch mode); the pinned 5.2 takes these three.
        self.populators = get_related_populators(klass_info, select, connection.alias)  # type: ignore[call-arg]
        self.converters = compiler.get_converters([s[0] for s in select[: compiler.col_count]])

    def load(self, rows: list[tuple[Any, ...]]) -> list[Any]:
        if self.converters:
            rows = list(self.compiler.apply_converters(rows, self.converters))
        out = []
        for row in rows:
            obj = self.model.from_db(connection.alias, self.init_list, row[self.start:self.end])
            for populator in self.populators:
                populator.populate(row, obj)
            out.append(obj)
        return out
