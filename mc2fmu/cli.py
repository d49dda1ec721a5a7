"""The ``mc2fmu`` command line: one subcommand per pipeline stage, each a thin call into the library.

Heavy imports (numpy and up) happen inside the commands so that ``--help`` is instant.
Errors of the package become a message per problem on stderr and exit code 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

MAIN_HELP = """\
mc2fmu turns multibody simulations into fast reduced models (FMUs).

Pipeline:  mechanism + pose exports  --ingest-->  natural-coordinate dataset (.npz)
           --train-->  minimal-coordinate model  --export-->  FMU

Inputs you provide:
  MECHANISM   a TOML (or JSON) file describing the moving bodies (mass, centre of mass,
              inertia about it), gravity and the input channels (forces/torques);
              see `mc2fmu ingest --help` for the format.
  RUN         one pose export per simulation run (.csv, .csv.gz or .npz): a time column,
              every body's position and orientation, every input's value.
"""

INGEST_HELP = """\
Convert pose exports of a multibody tool into one natural-coordinate dataset.

MECHANISM file (TOML; JSON with the same keys is also accepted):

  name = "four_bar"
  gravity = [0.0, -9.81, 0.0]      # m/s^2, global frame (default [0, 0, 0])

  [[bodies]]                       # every moving rigid body; the ground is implicit
  name = "crank"                   # identifier [A-Za-z_][A-Za-z0-9_]*
  mass = 2.35                      # kg, > 0
  com = [0.1, 0.0, 0.0]            # centre of mass in the body frame, m (default origin)
  inertia = [0.01, 0.02, 0.02]     # about the COM, body axes, kg m^2: 3 principal
                                   # values or a full symmetric 3x3 [[..],[..],[..]]
  [[inputs]]                       # excitation channels (become the FMU's inputs)
  name = "tau"
  kind = "torque"                  # "force" or "torque"
  body = "crank"
  direction = [0, 0, 1]            # global frame, unit; the value is the magnitude
  # a force also needs  point = [x, y, z]  (application point, body frame, m)

RUN files (.csv, .csv.gz or .npz with the same column names), one per simulation:

  time                             s, strictly increasing, uniform step
  <body>.x <body>.y <body>.z       body-frame origin in the global frame, m
  <body>.qw .qx .qy .qz            unit quaternion body->global, scalar first
     or <body>.R11 ... <body>.R33  rotation matrix rows
  <input name>                     value of each input at that time (N or N m)

Other columns are ignored with a warning.  Quaternions must be unit to 1e-6 and
matrices orthogonal to 1e-6 (max |R^T R - I|); both are then made exact.

OUTPUT (.npz): t, x (natural coordinates: per body its COM r0 and r1..r3 =
r0 + L R e_k), xd, M (constant mass matrix), f (generalized force incl. gravity),
u, f_g/f_B/f_C (f = f_g + f_B u + sum_i u_i f_C[i] x), run_offsets, dt, rigidity
and meta (JSON: mechanism, coordinate names, point layout, runs).  Written only if
every input is valid.

example:
  mc2fmu ingest examples/four_bar/mechanism.toml examples/four_bar/runs/*.csv.gz -o four_bar.npz
"""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="mc2fmu", description=MAIN_HELP, formatter_class=_formatter)
    parser.add_argument("--version", action="version", version=f"mc2fmu {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "ingest", help="pose exports + mechanism -> natural-coordinate dataset (.npz)",
        description=INGEST_HELP, formatter_class=_formatter,
    )
    p.add_argument("mechanism", metavar="MECHANISM", help="mechanism file (.toml or .json)")
    p.add_argument("runs", metavar="RUN", nargs="+", help="pose export(s): .csv, .csv.gz or .npz")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="dataset to write")
    p.set_defaults(func=_cmd_ingest)
    return parser


def _cmd_ingest(args: argparse.Namespace) -> int:
    from .dataset import ingest

    ds = ingest(args.mechanism, args.runs, args.output)
    mech = ds.mechanism
    print(f"wrote {args.output}: mechanism '{mech.name}', {len(mech.bodies)} bodies, "
          f"{ds.layout.size} natural coordinates, {len(mech.inputs)} input(s)")
    for k, run in enumerate(ds.runs()):
        print(f"  {run.name:<12} {len(run.t):>7} samples  dt {run.dt:.6g} s  "
              f"{run.t[-1] - run.t[0]:.6g} s  rigidity residual {ds.rigidity[k]:.2e} m")
    return 0


class _CliLogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CliLogFormatter())
    level = logging.ERROR if args.quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    root = logging.getLogger("mc2fmu")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False

    from .errors import Mc2fmuError

    try:
        return int(args.func(args) or 0)
    except Mc2fmuError as exc:
        for line in exc.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
