"""Sphinx directives that generate reference pages from the code at build time, so they cannot
go stale:

``hlsnn-config-schema``
    A table of every key of a config schema (:class:`hlsnn.config.Field` mappings): the
    argument names the schema: ``board`` (:data:`hlsnn.config.BOARD_FIELDS`), ``accel`` (the
    top-level keys of an accelerator config), an engine name (that engine's section, from
    :func:`hlsnn.engine_registry.engines`), ``deploy`` or ``deploy-format`` (deployment configs,
    :mod:`hlsnn.deploy.config`). Nested sections are flattened to dotted keys.

``hlsnn-cli``
    The ``--help`` of every ``hlsnn`` command, from the parser :func:`hlsnn.cli.build_parser`
    builds (so every option the command line accepts is listed, with its help text).

``hlsnn-network-rules``
    The network mode's integer rules, one row each, from :data:`hlsnn.engines.network.rules.RULES`:
    op, name, the emulator function that computes it, the kernel loop per engine, the tests that
    hold it, and the code it had before it had a name.
"""
from __future__ import annotations

import argparse
import os

from docutils import nodes
from docutils.parsers.rst import Directive


def _schema(name):
    from hlsnn import config
    import hlsnn.engines  # noqa: F401  (fills the engine registry)
    from hlsnn.engine_registry import engines
    if name == "board":
        return config.BOARD_FIELDS
    if name == "accel":
        return config.TOP_FIELDS_BASE
    if name in ("deploy", "deploy-format"):
        from hlsnn.deploy import config as dconfig
        return dconfig.FIELDS if name == "deploy" else dconfig.FORMAT_FIELDS
    registry = engines()
    if name in registry:
        return registry[name].schema
    raise ValueError(f"hlsnn-config-schema: unknown schema {name!r}; known: board, accel, deploy, "
                     f"deploy-format, " + ", ".join(registry))


def _default(f):
    from hlsnn.config import REQUIRED
    if f.default is REQUIRED:
        return "required"
    if f.default is None:
        return "none"
    if isinstance(f.default, bool):
        return "true" if f.default else "false"
    if f.default == "":
        return '""'
    return repr(f.default) if isinstance(f.default, str) else str(f.default)


def _rows(fields, prefix=""):
    for key, f in fields.items():
        path = f"{prefix}{key}"
        if f.kind == "section" and f.fields:
            yield path, "a mapping (keys below)", _default(f) if f.default is not None else "none", f.doc
            yield from _rows(f.fields, path + ".")
        else:
            yield path, f.allowed(), _default(f), f.doc


def _table(header, rows, widths):
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    for w in widths:
        group += nodes.colspec(colwidth=w)
    head = nodes.thead()
    group += head
    body = nodes.tbody()
    group += body
    for target, cells in ((head, header),) + tuple((body, r) for r in rows):
        row = nodes.row()
        for i, text in enumerate(cells):
            entry = nodes.entry()
            para = nodes.paragraph()
            para += nodes.literal(text=text) if (i == 0 and target is body) else nodes.Text(text)
            entry += para
            row += entry
        target += row
    return table


class ConfigSchema(Directive):
    required_arguments = 1

    def run(self):
        rows = list(_rows(_schema(self.arguments[0])))
        return [_table(("key", "allowed values", "default", "meaning"), rows, (20, 40, 10, 40))]


class CliReference(Directive):
    def run(self):
        from hlsnn.cli import build_parser
        old = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "100"          # argparse wraps help to $COLUMNS: the same page everywhere
        try:
            parser = build_parser()
            out = [nodes.literal_block(text=parser.format_help().rstrip(), language="text")]
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            helps = {c.dest: c.help for c in sub._choices_actions}
            for name, p in sub.choices.items():
                out.append(nodes.rubric(text=f"hlsnn {name}", ids=[f"cli-{name}"], names=[f"cli-{name}"]))
                if helps.get(name):
                    out.append(nodes.paragraph(text=helps[name][0].upper() + helps[name][1:] + "."))
                out.append(nodes.literal_block(text=p.format_help().rstrip(), language="text"))
        finally:
            if old is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = old
        return out


class NetworkRules(Directive):
    def run(self):
        from hlsnn.engines.network import rules
        rows = [(name, op, *rest, f"{r.code} ({r.scope})" if r.code else "-")
                for r, (op, name, *rest) in zip(rules.RULES, rules.table_rows())]
        header = ("rule", "op", "emulator function", *rules.ENGINES, "tests", "was")
        return [_table(header, rows, (12, 12, 22, 9, 9, 9, 22, 5))]


def setup(app):
    app.add_directive("hlsnn-config-schema", ConfigSchema)
    app.add_directive("hlsnn-cli", CliReference)
    app.add_directive("hlsnn-network-rules", NetworkRules)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
