"""Spring: ``@Transactional`` on a method, or on its class, opens a transaction when the
method is entered **through the Spring proxy**; a call from another method of the same
object (``this.m()`` or bare ``m()``) bypasses the proxy and opens none (the analysis
ignores the annotation on such self-invocations).

Spring Data repository methods (``save``, ``saveAll``, ``delete…``) are transactional on
their own: one repository call commits by itself and is not a finding; several in a
method no transaction covers are (a failure after the first leaves it committed). JPA
``EntityManager.persist/merge/remove`` and ``JdbcTemplate.update`` outside a transaction
are autocommit-style writes, and so is a MyBatis mapper's ``insert…``/``update…``/
``delete…`` (``deptMapper.updateDept(dept)`` on a field whose type is a ``…Mapper`` from a
``mapper`` package or the caller's own package): outside a transaction each statement
commits on its own. ``redisTemplate.delete(key)`` is a cache operation, no database
effect.
"""

from __future__ import annotations

import re

from auditor.callgraph.names import strip_arguments
from auditor.analysis.transactions.base import CallContext, Classification, Effect
from auditor.index.model import CallSite

_REPOSITORY_METHODS = ("save", "delete", "insert", "update", "remove")
_ENTITY_MANAGER_METHODS = frozenset({"persist", "merge", "remove"})
# The rule's sinks name these calls on any receiver (``*.delete``, Mongo's ``*.deleteOne``):
# a mapper-shaped call with one of these names keeps the meaning it had without mappers.
_GENERIC_SINK_NAMES = frozenset({"delete", "deleteOne", "deleteMany", "updateOne", "updateMany", "insertOne", "insertMany"})
# What the rule's mapper sinks (``*apper.insert*``...) match: a write-named call on
# something named like a mapper.
_MAPPER_CALL = re.compile(r"(?:^|\.)\w*apper\.(?:insert|update|delete|batchInsert|batchUpdate|batchDelete)\w*$")
# MapStruct's ``@Mapper`` copies between objects (``updateEntityFromDto(dto, entity)``).
_MAPSTRUCT_NAME = re.compile(r"(?:From|To)[A-Z]")
_MAPPER_PACKAGE = re.compile(r"\.mappers?\.")


class SpringModel:
    """Repository calls are their own transactions; EntityManager/JDBC/MyBatis writes are not."""

    name = "spring"
    names = frozenset({"persist", "merge", "remove", "update", "batchUpdate"})

    def classify(self, call: CallSite, context: CallContext) -> Classification | None:
        stripped = strip_arguments(call.callee)
        mapper_shaped = context.is_rule_sink and _MAPPER_CALL.search(stripped) is not None
        if context.index.language != "java":
            return _not_a_mapper(call) if mapper_shaped else None
        receiver = stripped.rsplit(".", 1)[0].rsplit(".", 1)[-1].lower() if "." in stripped else ""
        if mapper_shaped:
            if _is_mybatis_mapper(stripped.rsplit(".", 1)[0].rsplit(".", 1)[-1], call, context):
                return Classification(Effect.WRITE, "MyBatis mapper write outside a transaction")
            if call.name not in _GENERIC_SINK_NAMES:
                return Classification(None, "not a MyBatis mapper")
        if "redis" in receiver:
            return Classification(None, "a Redis command (a cache, outside the database transaction)")
        if call.name in _ENTITY_MANAGER_METHODS and ("entitymanager" in receiver or receiver in ("em", "manager")):
            return Classification(Effect.WRITE, "JPA write outside a transaction")
        if "jdbctemplate" in receiver and call.name in ("update", "batchUpdate"):
            return Classification(Effect.WRITE, "JDBC autocommit write")
        if call.name.startswith(_REPOSITORY_METHODS) and (context.is_rule_sink or receiver.endswith(("repository", "repo", "dao"))):
            return Classification(Effect.REPOSITORY, "Spring Data repository call (its own transaction)")
        return None


def _not_a_mapper(call: CallSite) -> Classification | None:
    """Outside Java a mapper-shaped call is no MyBatis write (None: the rule's other sinks
    decide, for the names they match anyway)."""
    return None if call.name in _GENERIC_SINK_NAMES else Classification(None, "not a MyBatis mapper")


def _is_mybatis_mapper(field: str, call: CallSite, context: CallContext) -> bool:
    """Whether ``field`` is declared in the caller's file with a ``…Mapper`` type imported
    from a ``mapper``/``mappers`` package or not imported (the caller's own package), and
    the method is no MapStruct-style copy (``updateXFromDto``)."""
    if field in ("this", "") or _MAPSTRUCT_NAME.search(call.name):
        return False
    declaration = re.compile(rf"\b([A-Z]\w*Mapper)(?:<[^;=()]*>)?\s+{re.escape(field)}\s*[;=]")
    for text in context.lines:
        found = declaration.search(text) if field in text else None
        if found is None:
            continue
        type_name = found.group(1)
        imported = [record.module for record in context.index.imports if (record.name or record.module.rsplit(".", 1)[-1]) == type_name]
        return not imported or any(_MAPPER_PACKAGE.search(f".{module}.") for module in imported)
    return False
