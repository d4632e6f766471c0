"""A deployment's command line as the `gnomon` CLI reads it: parsed by the click commands
themselves (unknown flags and roles are refused as on a real start), then the role's settings
loaded from the mounted config file, the container's environment and the flags, as
the server commands load them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import click

from gnomon.config import (
    CompactionNodeConfig,
    MetaConfig,
    NodeConfig,
    RoleConfig,
    StandaloneConfig,
)
from gnomon_app.cli import main

#: The server roles and the settings each reads.
ROLE_CONFIGS: dict[str, type[RoleConfig]] = {
    "meta": MetaConfig,
    "node": NodeConfig,
    "compaction-node": CompactionNodeConfig,
    "standalone": StandaloneConfig,
}


@dataclass(frozen=True)
class RoleLine:
    role: str
    config: RoleConfig


def parse_cli(args: Sequence[str]) -> list[click.Context]:
    """The contexts of ``gnomon ARGS``, from the main command to the one it runs, made by the
    click commands themselves: an unknown command or flag raises click's usage error."""
    command: click.Command = main
    name, parent, remaining = "gnomon", None, list(args)
    chain: list[click.Context] = []
    while True:
        ctx = command.make_context(name, list(remaining), parent=parent)
        chain.append(ctx)
        if not isinstance(command, click.Group):
            return chain
        # A group stops at its subcommand; what follows it is left in ctx.args.
        name = remaining[len(remaining) - len(ctx.args) - 1]
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.UsageError(f"no such command {name!r}", ctx)
        command, parent, remaining = sub, ctx, ctx.args


def parse_role_line(
    args: Sequence[str], *, files: Mapping[str, str], env: Mapping[str, str]
) -> RoleLine:
    """The role and settings of ``gnomon ARGS`` in a container whose files at the paths of
    ``files`` are the local files it maps them to and whose environment is ``env``.

    Raises click's usage errors for a line the CLI refuses, and AssertionError for a config
    file that is not mounted or a GNOMON_ variable no setting of the role reads (the CLI
    would ignore it silently)."""
    chain = parse_cli(args)
    root, sub = chain[0], chain[-1]
    role = sub.info_name or ""
    assert len(chain) == 2 and role in ROLE_CONFIGS, f"{' '.join(args)}: not a server role"
    cls = ROLE_CONFIGS[role]
    names = {f.name for f in fields(cls)}
    unread = {
        k for k in env if k.startswith("GNOMON_") and k[len("GNOMON_") :].lower() not in names
    } - {"GNOMON_LOG_LEVEL"}  # the main command reads that one
    assert not unread, f"gnomon {role} reads no setting named by {sorted(unread)}"
    config_file = sub.params.get("config_file")
    if config_file is not None:
        assert config_file in files, f"--config {config_file} is not mounted into the container"
        config_file = files[config_file]
    flags = {k: v for k, v in sub.params.items() if k in names}
    flags["log_level"] = root.params.get("log_level")
    return RoleLine(role, cls.load(config_file, env=dict(env), flags=flags))
