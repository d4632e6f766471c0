"""Command groups whose subcommands are imported only when one of them runs or is listed:
a subcommand's module may pull in Arrow, DataFusion or gRPC, which every other command would
otherwise pay for before doing anything (``gnomon --help`` among them)."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def console(*, stderr: bool = False) -> Console:
    """The console commands print on (``stderr``: where one says why it could not run;
    scripts read stdout, people both), made when first used: rich takes a while to import."""
    from rich.console import Console

    return Console(stderr=stderr)


class LazyGroup(click.Group):
    """A group holding, beside its ordinary commands, commands named by where they live
    (:meth:`add_lazy_command`), imported the first time they are asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy: dict[str, tuple[str, str]] = {}

    def add_lazy_command(self, name: str, module: str, attr: str) -> None:
        """Add the command ``module.attr`` as ``name``, importing ``module`` only when it is
        run or listed."""
        self._lazy[name] = (module, attr)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self._lazy:
            return command
        module_name, attr = self._lazy[cmd_name]
        found: click.Command = getattr(self.import_module(module_name), attr)
        # Kept, so a second lookup (help, then the run) does not look it up again.
        self.add_command(found, cmd_name)
        return found

    def import_module(self, name: str) -> ModuleType:
        """The module a lazy command lives in (a subclass may look elsewhere too)."""
        return importlib.import_module(name)
