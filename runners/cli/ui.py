"""`bigtrain ui`: the read-only lineage web app (pipeline/lineage/web) on the store `lineage`
reads, served on loopback unless --host names another address together with --allow-remote."""

from __future__ import annotations

import argparse
import functools
import os
import sys

from components import config as config_lib
from runners.cli.options import config_options, port_number, resolve_config
from runners.local import metadata as metadata_lib


def add_ui(sub, common: list, *, open_lineage) -> None:
    """`bigtrain ui`; open_lineage is the CLI's own (runners/cli/app.py), the reader `lineage` uses."""
    ui = sub.add_parser("ui", parents=common + [config_options(with_preset=False)],
                        help="browse runs and lineage in a web browser (read-only)",
                        description="Serve the runs, run DAGs, artifacts, models, diffs and "
                                    "training curves of one metadata store on http://HOST:PORT/.")
    ui.add_argument("--port", type=port_number, default=8080,
                    help="port 1-65535, or 0: a free one (printed); default 8080")
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ui.add_argument("--allow-remote", action="store_true",
                    help="required with a --host other than loopback (no authentication!)")
    ui.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="also answer requests whose Host header is NAME (NAME:PORT: that port "
                         "only), e.g. the name a reverse proxy forwards; repeatable. Other names "
                         "than the loopback ones and the bound address get 421")
    ui.set_defaults(func=functools.partial(cmd_ui, open_lineage=open_lineage))


def cmd_ui(args: argparse.Namespace, open_lineage) -> int:
    import ipaddress
    import re
    from components.storage import fs
    from pipeline.lineage.store import Lineage
    from pipeline.lineage.connection import diagnose, open_store
    from pipeline.lineage.web.app import serve
    from runners.local.home import LocalPaths, readable_folders
    from runners.local.lock import live_writer
    try:
        loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
    except ValueError:  # a host name: the address it stands for is not checked here
        raise config_lib.ConfigError(
            f"--host {args.host!r} is not an IP address: pass a numeric address (127.0.0.1, ::1, "
            "or a network address together with --allow-remote) or localhost") from None
    if not loopback and not args.allow_remote:
        raise config_lib.ConfigError(f"--host {args.host} is not loopback: add --allow-remote to "
                                     "serve lineage to the network (the UI has no authentication)")
    for name in args.allow_host:
        if not re.fullmatch(r"[A-Za-z0-9._-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?", name):
            raise config_lib.ConfigError(f"--allow-host {name!r} is not a host name (NAME or "
                                         "NAME:PORT, e.g. lineage.example.org)")
    open_lineage(args)  # a missing or damaged store: the named error now, not on the first page
    config = resolve_config(args)
    home = os.path.abspath(config.paths.home)
    connection = metadata_lib.connection(config, read_only=True)

    def fresh_lineage():  # per request; the sqlite store opens read-only, MLMD is never written
        return Lineage(open_store(connection),
                       live_writer=live_writer(home) if os.path.isdir(home) else None)

    if not loopback:
        print(f"bigtrain ui: WARNING: serving on {args.host} to the network, without "
              "authentication", file=sys.stderr)
    pipeline_root = LocalPaths.for_config(config).pipeline_root
    serve(fresh_lineage, readable_folders(home if os.path.isdir(home) else None,
                                          None if fs.is_remote(pipeline_root) else pipeline_root),
          args.host, args.port, diagnose_store=lambda: diagnose(connection),
          allow_hosts=args.allow_host,
          announce=lambda port: print(f"bigtrain ui: http://{args.host}:{port}/", flush=True))
    return 0
