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
from pathlib import Path

log = logging.getLogger("mc2fmu.cli")

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
  [[springs]]                      # optional linear spring-dampers (part of the model)
  name = "strut"
  body_a = "upper_damper"          # a body or "ground"; point_a in its frame (global
  point_a = [0.0, 0.0, 0.0]        # for the ground), m; the same for body_b/point_b
  body_b = "lower_damper"
  point_b = [0.0, 0.0, 0.0]
  stiffness = 2000.0               # N/m; tension = stiffness (l - length) + damping ldot
  damping = 50.0                   # N s/m (default 0)
  length = 0.40                    # rest length, m

RUN files (.csv, .csv.gz or .npz with the same column names), one per simulation:

  time                             s, strictly increasing, uniform step
  <body>.x <body>.y <body>.z       body-frame origin in the global frame, m
  <body>.qw .qx .qy .qz            unit quaternion body->global, scalar first
     or <body>.R11 ... <body>.R33  rotation matrix rows
  <input name>                     value of each input at that time (N or N m)

Other columns are ignored with a warning.  Quaternions must be unit to 1e-6 and
matrices orthogonal to 1e-6 (max |R^T R - I|); both are then made exact.

OUTPUT (.npz): t, x (natural coordinates: per body its COM r0 and r1..r3 =
r0 + L R e_k), xd, M (constant mass matrix), f (generalized force incl. gravity
and springs), u, f_g/f_B/f_C (f = f_g + f_B u + sum_i u_i f_C[i] x + f_spring(x, xd),
the springs rebuilt from the mechanism), run_offsets, dt, rigidity and meta
(JSON: mechanism, coordinate names, point layout, runs).  Written only if every
input is valid.

example:
  mc2fmu ingest examples/four_bar/mechanism.toml examples/four_bar/runs/*.csv.gz -o four_bar.npz
"""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .capabilities import BACKENDS, DEFAULT_BACKEND, INTERFACES, KINDS, support_text
    from .pipeline import DEMO_MECHANISMS

    # -v/-q are accepted before or after the subcommand
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more log output (-vv for debug)")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="only errors, no progress")
    parser = argparse.ArgumentParser(prog="mc2fmu", description=MAIN_HELP, formatter_class=_formatter, parents=[common])
    parser.add_argument("--version", action="version", version=f"mc2fmu {__version__}")
    parser.set_defaults(verbose=0, quiet=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, func, help: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=description, formatter_class=_formatter, parents=[common])
        p.set_defaults(func=func)
        return p

    # arguments several commands take alike
    mechanism = {"metavar": "MECHANISM", "help": "mechanism file (.toml or .json)"}
    runs_or_dataset = {"metavar": "RUN", "nargs": "+", "help": "pose export(s), or one dataset .npz from `mc2fmu ingest`"}
    model_dir = {"metavar": "MODEL_DIR", "help": "directory written by `mc2fmu train`"}
    fmi = {"type": int, "default": 2, "choices": (2, 3), "help": "FMI version (default 2; 3 is native only)"}
    platforms = {"metavar": "LIST", "default": None,
                 "help": "native backend: the platforms to build binaries for, comma-separated: x86_64-linux, "
                         "x86_64-windows, aarch64-linux, or all (default auto: every one whose compiler and "
                         "emulator are installed; $MC2FMU_PLATFORMS overrides the default)"}

    p = command("ingest", _cmd_ingest, "pose exports + mechanism -> natural-coordinate dataset (.npz)", INGEST_HELP)
    p.add_argument("mechanism", **mechanism)
    p.add_argument("runs", metavar="RUN", nargs="+", help="pose export(s): .csv, .csv.gz or .npz")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="dataset to write")

    p = command("estimate-dof", _cmd_estimate_dof,
                "the number of minimal coordinates, estimated from the runs (with the evidence)", ESTIMATE_DOF_HELP)
    p.add_argument("mechanism", **mechanism)
    p.add_argument("runs", **runs_or_dataset)

    p = command("train", _cmd_train, "learn minimal coordinates and the reduced ODE -> model directory", TRAIN_HELP)
    p.add_argument("mechanism", **mechanism)
    p.add_argument("runs", **runs_or_dataset)
    _add_training_arguments(p)
    p.add_argument("--checkpoint-every", type=float, default=30.0, metavar="SECONDS",
                   help="write the training state to MODEL_DIR.checkpoint.pt this often (default 30; 0: only on Ctrl-C)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted training from MODEL_DIR.checkpoint.pt (same data and options; "
                        "with --seeds: every unfinished seed in MODEL_DIR.seeds/)")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="with --seeds: run the seeds as Ray tasks on the cluster at ADDRESS (ray://HOST:10001 or "
                        "HOST:6379; needs the extra `cluster`); default: a process pool on this machine")
    p.add_argument("--threads", type=_threads, default=None, metavar="N",
                   help="torch threads of this training (default $MC2FMU_TRAIN_THREADS, else 2, whatever the "
                        "machine, so the model does not depend on its cores; the last bits of the model depend on "
                        "N; not with --seeds K, which runs each seed on 1, as its own process)")
    p.add_argument("-o", "--output", required=True, metavar="MODEL_DIR", help="model directory to write")

    p = command("batch", _cmd_batch, "many conversions from a jobs file, as Ray tasks -> OUT/", BATCH_HELP)
    p.add_argument("jobs", metavar="JOBS.toml", help="the jobs file (see above)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="folder for the outputs")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="an existing Ray cluster (ray://HOST:10001 or HOST:6379); default: a local Ray instance, "
                        "started and stopped by this command")
    p.add_argument("--cpus", type=int, default=None, metavar="N",
                   help="the local Ray instance's CPUs: jobs run at once (default: every core)")

    p = command("simulate", _cmd_simulate, "roll a trained model out on a run's inputs -> pose CSV", SIMULATE_HELP)
    p.add_argument("model", **model_dir)
    p.add_argument("mechanism", metavar="MECHANISM",
                   help="mechanism file the run belongs to: the trained one, or a variant that changes only physical "
                        "parameters (masses, centres of mass, inertias, gravity, springs, input directions and "
                        "points), whose values the model then uses")
    p.add_argument("run", metavar="RUN", help="pose export whose initial state and inputs drive the model")
    p.add_argument("-o", "--output", required=True, metavar="OUT.csv", help="poses + q, qd, envelope and motion outputs (.csv, .csv.gz, .npz)")

    p = command("linearize", _cmd_linearize,
                "the reduced model's A, B, C, D at an equilibrium (or a given state) -> JSON", LINEARIZE_HELP)
    p.add_argument("model", **model_dir)
    p.add_argument("--mechanism", metavar="VARIANT.toml",
                   help="a mechanism file that changes only physical parameters (masses, centres of mass, inertias, "
                        "gravity, springs, input directions and points): linearise with its values")
    p.add_argument("--at", nargs="+", default=[], metavar="NAME=V1[,V2...]",
                   help="the operating point: u=... (the input; default 0), q=... (a state instead of the "
                        "equilibrium), qd=... (with q; default 0)")
    p.add_argument("-o", "--output", required=True, metavar="LIN.json", help="A, B, C, D and the modes as JSON")

    p = command("from-mujoco", _cmd_from_mujoco,
                "MuJoCo model + recorded trajectories -> mechanism.toml + pose exports", FROM_MUJOCO_HELP)
    p.add_argument("model", metavar="MODEL.xml", help="MuJoCo model (MJCF .xml, or compiled .mjb)")
    p.add_argument("trajectories", metavar="TRAJ.npz", nargs="+", help="recorded trajectories: time, qpos, ctrl")
    p.add_argument("-o", "--output", required=True, metavar="OUT_DIR",
                   help="directory to write mechanism.toml and runs/<TRAJ>.csv.gz into")

    p = command("export", _cmd_export,
                "trained model directory -> FMU (FMI 2.0/3.0, co-simulation/model exchange)", EXPORT_HELP.format(support=support_text()))
    p.add_argument("model", **model_dir)
    p.add_argument("-o", "--output", required=True, metavar="OUT.fmu", help="FMU to write (NAME.mo with --format modelica, OUT.casadi with --format casadi)")
    p.add_argument("--format", default="fmu", choices=("fmu", "modelica", "casadi"),
                   help="fmu (default); modelica: one self-contained NAME.mo, model NAME, the reduced dynamics as "
                        "equations with the physical parameters as parameters (-o NAME.mo; decoder-manifold models); "
                        "casadi: the reduced ODE as a CasADi function for MPC (needs casadi)")
    p.add_argument("--backend", default=None, choices=list(BACKENDS),
                   help="; ".join(f"{k}: {v[0]} (models of: {', '.join(r for r in KINDS if KINDS[r].pairs(k))})"
                                  for k, v in BACKENDS.items()) + f" (default {DEFAULT_BACKEND})")
    p.add_argument("--fmi", **{**fmi, "default": None})
    p.add_argument("--interface", default=None, choices=list(INTERFACES),
                   help="co-simulation (default), model exchange or both (me/both: native only)")
    p.add_argument("--platforms", **platforms)
    p.add_argument("--mechanism", metavar="VARIANT.toml",
                   help="a mechanism file that changes only physical parameters (masses, centres of mass, inertias, "
                        "gravity, spring constants and attachment points, input directions and points): its values "
                        "are built in, and are the start values of the FMU's physical parameters")

    p = command("validate", _cmd_validate, "run an FMU with fmpy on reference runs and report its accuracy",
                VALIDATE_HELP)
    p.add_argument("fmu", metavar="FMU", help="FMU written by `mc2fmu export`")
    p.add_argument("mechanism", metavar="MECHANISM", help="mechanism file the runs belong to")
    p.add_argument("runs", metavar="RUN", nargs="+", help="reference pose export(s): initial state, inputs, expected poses")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument("--report", metavar="DIR", help="write PNG plots and index.html into DIR")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                   help="stop a run whose simulation has not ended after SECONDS (wall time; e.g. an FMU that hangs), "
                        "killing the FMU's process, with an error (default: 60 s + 100 x the run's simulated length)")

    p = command("convert", _cmd_convert, "ingest + train + export + validate in one go -> FMU and report",
                CONVERT_HELP)
    p.add_argument("mechanism", **mechanism)
    p.add_argument("runs", metavar="RUN", nargs="+", help="pose export(s) to train on")
    p.add_argument("--validate", nargs="+", default=[], metavar="RUN",
                   help="held-out pose export(s) to validate on as well (the training runs always are)")
    p.add_argument("--backend", default=DEFAULT_BACKEND, choices=list(BACKENDS),
                   help=f"FMU backend (default {DEFAULT_BACKEND}; python: see `mc2fmu export --help`)")
    p.add_argument("--fmi", **fmi)
    p.add_argument("--interface", default="cs", choices=list(INTERFACES),
                   help="co-simulation (default), model exchange or both (me/both: native only); "
                        "validation runs the co-simulation interface, so me alone is not validated")
    p.add_argument("--platforms", **platforms)
    _add_training_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT.fmu",
                   help="FMU to write; the model goes to OUT.model/, the report to OUT.report/")

    p = command("demo", _cmd_demo, "the whole pipeline on a bundled mechanism (a few minutes) -> FMU and report",
                DEMO_HELP)
    p.add_argument("--mechanism", default="four_bar", choices=list(DEMO_MECHANISMS),
                   help="the bundled mechanism (default four_bar)")
    p.add_argument("-o", "--output", default="out/demo", metavar="DIR", help="directory for everything (default out/demo)")
    return parser


def _add_training_arguments(p: argparse.ArgumentParser) -> None:
    """Training options shared by `train` and `convert`: --reducer, then every registered
    reducer's config fields (their metadata are the options; see mc2fmu.reducers.base)."""
    from .reducers.base import DEFAULT_REDUCER, REDUCERS, add_config_arguments

    p.add_argument("--reducer", default=DEFAULT_REDUCER, choices=list(REDUCERS),
                   help=f"the model family to train (default {DEFAULT_REDUCER})")
    seen: set[str] = set()
    for name, entry in REDUCERS.items():
        add_config_arguments(p.add_argument_group(f"{name} reducer options ({entry.description})"),
                             entry.config_class(), seen)


def _train_config(args: argparse.Namespace):
    from .errors import TrainingError
    from .reducers.base import config_from_args, foreign_options, reducer_entry

    config_cls = reducer_entry(args.reducer).config_class()
    problems = foreign_options(config_cls, args, args.reducer)
    if problems:
        raise TrainingError(problems)
    return config_from_args(config_cls, args)


EXPORT_HELP = """\
Export a trained model as an FMU: FMI 2.0 or 3.0 (--fmi), co-simulation, model exchange
or both (--interface), as generated C (the default backend, native); or FMI 2.0
co-simulation running the model's ONNX graphs in the host's Python (--backend python).

The FMU's variables (a public contract):
  inputs      one per mechanism input, named as in the mechanism file (N or N.m)
  outputs     <body>.x .y .z (body-frame origin, m), <body>.qw .qx .qy .qz (unit
              quaternion, scalar first), q[i], qd[i] (i = 1..dof), envelope (0 inside
              the training envelope; else the excursion in training spans)
  parameters  q_start[i], qd_start[i] (default: the first training run's initial state);
              decoder-manifold models: <body>.mass, <body>.com[1..3],
              <body>.inertia[1..3 or 1..6], gravity[1..3], <spring>.stiffness .damping
              .length (default: the mechanism exported; --mechanism VARIANT.toml sets them)

Internally the model steps on a fixed grid (the training step) with the map it was
trained with; any communication step works (outputs between grid points are
interpolated, the grid trajectory never changes).  Non-finite inputs or a diverging
state are refused with a logged error.  Get/set/serialize FMU state is supported.
Default experiment: 0 .. the first training run's length, step = the training step.

Backend native (default): generated C99 compiled here with $CC (default gcc), checked
against the model to 1e-12; the FMU carries its sources too.  It carries one binary per
platform whose toolchain is installed (--platforms): Linux x86-64 (binaries/linux64 in
FMI 2, x86_64-linux in FMI 3), Windows x86-64 (win64, x86_64-windows; Debian packages
gcc-mingw-w64-x86-64 and wine64) and Linux aarch64 (aarch64-linux in both;
gcc-aarch64-linux-gnu and qemu-user).  Each binary is checked like the first, under wine
or qemu-user, and loads nothing but the system's C library.  The importer needs no
Python, and no FMI call sequence, value or serialized state can crash or hang it.  In
model exchange it provides exact directional derivatives (complex step through the C
code) of der(q), der(qd) and the outputs along the states and inputs.
Backend python: pythonfmu + the model's ONNX graphs (checked against torch to 1e-12 when
the model was trained).  The importing process needs Python with numpy and onnxruntime;
pythonfmu 0.7 leaks about 1.2 kB of the host's memory per instantiation.
Both embed the model directory (resources/model/), which `mc2fmu validate` reads.
What each reducer's models export to (mc2fmu.capabilities; model exchange has both
interfaces with --interface both):
{support}

--format modelica writes the reduced model as Modelica source instead: one NAME.mo
(-o NAME.mo, model NAME), the Modelica language only (no MSL, no external code): the
decoder, mass matrix, forces, springs and identified terms as equations, states q and qd,
the same inputs, outputs and physical parameters as the FMU (Modelica names: <body>_x,
<body>_mass, ...; docs/modelica.md).

examples:
  mc2fmu export out/four_bar -o out/four_bar.fmu
  mc2fmu export out/four_bar -o out/four_bar_me.fmu --fmi 3 --interface both
  mc2fmu export out/four_bar -o out/four_bar.fmu --platforms x86_64-linux,x86_64-windows
  mc2fmu export out/four_bar -o out/four_bar_py.fmu --backend python
  mc2fmu export out/four_bar -o out/FourBarROM.mo --format modelica
  mc2fmu export out/four_bar -o out/four_bar.casadi --format casadi   # for MPC (CasADi)
"""

VALIDATE_HELP = """\
Simulate an FMU with fmpy (a fresh process per run) on each reference run's inputs from
the run's initial state, and compare with the run's poses.  Reports per run: position
NRMSE, max position and rotation errors, whether the stop time was reached, when the
envelope flag rose, and the wall time; plus fmpy's model-description problems.

The mechanism file may be a physical variant of the exported one (other masses, centres of
mass, inertias, gravity or spring constants): the FMU's parameters are set to its values
through FMI (FMUs of decoder-manifold models) and listed.

Exit code: 0 when the model description has no problems (accuracy is reported, not
judged), 1 otherwise.

example:
  mc2fmu validate out/four_bar.fmu examples/four_bar/mechanism.toml \\
      examples/four_bar/runs/low.csv.gz --report out/four_bar_report
"""

CONVERT_HELP = """\
Ingest, train, export and validate in one go: the FMU (OUT.fmu), the trained model
(OUT.model/) and a validation report (OUT.report/index.html) on the training runs and
the --validate runs.  The training options are those of `mc2fmu train`.

example:
  mc2fmu convert examples/four_bar/mechanism.toml examples/four_bar/runs/train.csv.gz \\
      --validate examples/four_bar/runs/low.csv.gz -o out/four_bar.fmu
"""

DEMO_HELP = """\
The whole pipeline on a bundled mechanism: simulate it with Exudyn (runs train, low,
shape, high), train on `train`, export the FMU, validate it with fmpy on all four runs
and write a report.  Needs the examples extra: pip install -c constraints.txt -e ".[examples]".
Takes about 2 minutes for the four-bar on 2 cores.
"""


TRAIN_HELP = """\
Learn the mechanism's minimal coordinates q and its reduced ODE
M_m(q) qdd = J^T f(h_d(q), u) - G_m(q)[qd, qd] from natural-coordinate data.

The number of minimal coordinates N is estimated from the data by default (--dof auto:
the evidence is printed, and data that cannot decide it is refused with the reason; see
`mc2fmu estimate-dof`), or given with --dof N.  Two modes:
  (default)               unknown coordinates: a full autoencoder learns h_e: x -> q and
                          h_d: q -> x (the paper's section 4.2.1)
  --coords C,...          known coordinates: q are the named pose columns (positions
                          <body>.x|y|z or rotation entries <body>.R11..R33); only h_d is
                          trained (section 4.2.2)

Loss: reconstruction + a dynamics term (the one-step prediction error taken as an
acceleration in decoded space), each divided by its data scale.  Adam, then L-BFGS, on a
subsample of time triplets; 95/5 split, the best validation weights are kept.
--loss appendix uses the paper appendix's velocity/acceleration loss instead of the
dynamics term; --rollout K adds K steps of the model's own step map (windows of K+2
samples).

Training state is saved to MODEL_DIR.checkpoint.pt every --checkpoint-every seconds and
on Ctrl-C; the same command plus --resume continues it and ends with exactly the weights
of an uninterrupted run.  The checkpoint is removed once the model is written.

The result depends on the seed's basin, by several times on held-out runs, and the
validation loss ranks the seeds alike: --seeds K trains --seed, --seed + 1, ... in parallel
(a process pool sized to the cores, or Ray tasks with --ray ADDRESS) and keeps the lowest
validation loss; every seed's loss, iterations and time go to the training record.  Each
training runs torch on one thread, so K and --seed give the same model whatever the cores.

The result is a directory: model.json (format version, reducer, mechanism, layout, dof,
dt, training envelope, initial state, training record, versions, the model's parameters),
arrays.npz (the model's arrays) and resources/ (the model's ONNX graphs).
--reducer picks the model family (registered reducers: see the option's choices).

examples:
  mc2fmu train examples/four_bar/mechanism.toml examples/four_bar/runs/train.csv.gz -o out/four_bar
  mc2fmu train examples/two_bar/mechanism.toml examples/two_bar/runs/train.csv.gz \\
      --coords base1.y,base2.y --hidden 64,64 -o out/two_bar
"""

BATCH_HELP = """\
Run many conversions (train -> export -> validate, as `mc2fmu convert`) as Ray tasks: on a
local Ray instance this command starts and stops, or on an existing cluster (--ray ADDRESS).
Needs the extra `cluster`: pip install -e ".[cluster]".

The jobs file (TOML; paths relative to it):
  [defaults]                         any train or export option, for every job
  lbfgs_iters = 3000
  [[jobs]]
  name = "four_bar"                  -> OUT/four_bar.fmu, OUT/four_bar.model/, OUT/four_bar.report/
  mechanism = "four_bar/mechanism.toml"
  train = ["four_bar/train.csv.gz"]
  validate = ["four_bar/low.csv.gz"] optional
  dof = 1                            per-job options override the defaults
Options: the train options with underscores (dof, coords, lbfgs_iters, seed, seeds, ...),
reducer, and the export options backend, fmi, interface.  A bad file is refused before
anything runs.

Each job writes its outputs only when it succeeds; a failed job is reported and the others go
on (exit 1 at the end).  A job whose inputs and options are unchanged since it last succeeded
(a content hash, OUT/<name>.hash) is skipped.  OUT/summary.json and OUT/index.html list every
job; one line per job as it ends.  Ctrl-C stops cleanly: the finished jobs stay.

examples:
  mc2fmu batch linkages.toml -o out/linkages
  mc2fmu batch linkages.toml -o out/linkages --ray ray://head-node:10001
"""


def _cmd_batch(args: argparse.Namespace) -> int:
    from .parallel.batch import SUMMARY, run_batch
    from .pipeline import convert

    try:
        results = run_batch(convert, args.jobs, args.output, ray_address=args.ray, num_cpus=args.cpus,
                            line=(lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr)))
    except KeyboardInterrupt:
        print(f"interrupted: the finished jobs are kept, listed in {Path(args.output) / SUMMARY}", file=sys.stderr)
        return 130
    failed = [name for name, r in results.items() if r["status"] != "ok"]
    print(f"{len(results) - len(failed)} of {len(results)} job(s) ok; summary {Path(args.output) / SUMMARY}, "
          f"index {Path(args.output) / 'index.html'}")
    for name in failed:
        print(f"  failed: {name}: {results[name]['error']}")
    return 1 if failed else 0


SIMULATE_HELP = """\
Roll a trained reduced model out from a run's initial state with the run's inputs, and
write poses in the pose-export layout (so any tool can compare them with the run), plus
q[i], qd[i], envelope (0 inside the training range, growing outside) and the FMU's
motion outputs (node and local-PCA models: those of their decoded motion): <body>.vx/.vy/.vz (the body-frame
origin's velocity), <body>.wx/.wy/.wz (angular velocity, global frame), kinetic_energy and
potential_energy (gravity and springs, J).  Prints the
position NRMSE against the run and when the envelope flag first rose.

Physical variants: MECHANISM may differ from the trained mechanism file in masses, centres
of mass, inertias, gravity, spring stiffness, damping, rest length and attachment points,
and input directions and points; the model then runs with the file's values (the decoder
holds the kinematics, the physics come from the file) and prints what differs.  Other
changes (bodies, inputs' names, kinds and bodies, springs' bodies and laws) are refused.
Learned spring laws and identified terms keep their trained coefficients; node and
local-PCA models learnt their dynamics and take no variant.  A variant moves the motion:
the envelope says when it leaves the configurations the model was trained on.

example (a heavier rocker):
  mc2fmu simulate out/four_bar heavy_rocker.toml runs/heavy_low.csv -o out/heavy.csv
"""

LINEARIZE_HELP = """\
Linearise a trained reduced model: by default at the static equilibrium (qdd = 0 at rest)
under the input u (default 0), found by Newton's method from the model's initial state;
with --at q=... at that state (and qd=...).  Writes JSON with A, B, C, D (state q, qd;
outputs: every body's origin x, y, z, then q and qd; keys states, inputs, outputs name the
rows and columns), the operating point and the modes, and prints each mode's frequency and
damping ratio.  The derivatives are exact (automatic differentiation of the same reduced
ODE simulate and the FMUs run), not finite differences.

examples:
  mc2fmu linearize out/four_bar -o out/four_bar_lin.json
  mc2fmu linearize out/five_bar --at u=0.5,-0.2 -o lin.json
  mc2fmu linearize out/four_bar --at q=0.3 qd=0 u=0 -o lin.json
"""

FROM_MUJOCO_HELP = """\
Convert a MuJoCo model and trajectories recorded with it into mc2fmu's inputs:
OUT_DIR/mechanism.toml and OUT_DIR/runs/<TRAJ>.csv.gz (then run `mc2fmu ingest`).

TRAJ files (.npz), one per simulation, sampled at a uniform step:
  time   (n_t,)      s, strictly increasing
  qpos   (n_t, nq)   data.qpos at each sample
  ctrl   (n_t, nu)   data.ctrl at each sample (may be left out if the model has
                     no actuators); other keys (e.g. qvel) are ignored

Supported:
  bodies   every body not welded to the world; body frame = MuJoCo's body frame
           (data.xpos, data.xmat), mass/COM/inertia from body_mass, body_ipos,
           body_iquat and body_inertia.  Names that are not identifiers are
           sanitised (e.g. 'upper arm' -> upper_arm; unnamed -> body<id>).
  inputs   one per actuator that is a plain motor (gain fixed, no bias, no
           dynamics) on a hinge or slide joint that is the only joint of its body
           and whose parent body is welded to the world: a torque about / a force
           along the fixed global joint axis, value = gear[0] * gainprm[0] * ctrl
           (clamped like MuJoCo: ctrlrange, forcerange).  Anything else (a joint
           between two moving bodies, servos, tendon/site transmissions...) is an
           error naming the actuator: apply such loads with data.xfrc_applied and
           describe them as [[inputs]] by hand.
  loops    connect/weld equalities are measured from the poses: MuJoCo's loops are
           SOFT and a violation above 1e-6 m is warned about (tighten solref/solimp).
  springs  a spatial tendon of two sites with a linear spring/damper (one
           springlength) becomes a [[springs]] entry; a world site is a ground point.
  warned   forces the mechanism cannot hold: joint damping and stiffness, friction
           loss, armature, gravcomp, fluid, other tendons, and contacts in the motion.

Nothing is written unless every input is valid.

example:
  mc2fmu from-mujoco four_bar.xml runs/train.npz runs/low.npz -o four_bar
  mc2fmu ingest four_bar/mechanism.toml four_bar/runs/*.csv.gz -o four_bar.npz
"""


def _cmd_ingest(args: argparse.Namespace) -> int:
    from .data.dataset import ingest

    ds = ingest(args.mechanism, args.runs, args.output)
    mech = ds.mechanism
    print(f"wrote {args.output}: mechanism '{mech.name}', {len(mech.bodies)} bodies, "
          f"{ds.layout.size} natural coordinates, {len(mech.inputs)} input(s)")
    for k, run in enumerate(ds.runs()):
        print(f"  {run.name:<12} {len(run.t):>7} samples  dt {run.dt:.6g} s  "
              f"{run.t[-1] - run.t[0]:.6g} s  rigidity residual {ds.rigidity[k]:.2e} m")
    return 0


ESTIMATE_DOF_HELP = """\
Estimate the mechanism's number of degrees of freedom (minimal coordinates, up to 10) from
its runs.  A mechanism with m degrees of freedom moves on an m-dimensional manifold of
configurations: a polynomial in m coordinates fits the samples, one in fewer misses a
direction of motion.  First, local fits: near configurations the runs pass at least five
times, a quadratic in k = 1..4 local coordinates (1e-10 to 1e-2 at the right k, about 0.6
below it).  When they do not decide (in 4 or more dimensions a run seldom returns), one fit
over the whole motion: a cubic in k = 1..10 principal coordinates, each tenth of the motion
predicted from the rest; it answers for motions of a few cm and degrees about a pose
(platforms, suspensions), not for large curved ones.  Prints the evidence of each and the
estimate; exit code 2 with the reason when the data does not decide (the runs hardly move or
do not return, a direction is barely excited: the message names its bodies, or no clear
drop): record longer or more varied runs, or give --dof N.  `train --dof auto` (the default)
uses the same estimate.

examples:
  mc2fmu estimate-dof examples/two_bar/mechanism.toml examples/two_bar/runs/train.csv.gz
  mc2fmu estimate-dof examples/hexapod/mechanism.toml examples/hexapod/runs/train.csv.gz
"""


def _cmd_estimate_dof(args: argparse.Namespace) -> int:
    from .data.dataset import load_training_data
    from .data.dof import estimate_dataset_dof
    from .errors import DatasetError

    est = estimate_dataset_dof(load_training_data(args.mechanism, args.runs))
    print(est.report())
    if est.dof is None:
        raise DatasetError(f"the runs do not decide the degrees of freedom: {est.reason}")
    return 0


def _notify(quiet: bool):
    return (lambda s: None) if quiet else (lambda s: print(s, file=sys.stderr))


def _cmd_train(args: argparse.Namespace) -> int:
    from .pipeline import train
    from .reducers.base import TrainingInterrupted

    cfg = _train_config(args)
    try:
        with _progress_bar(args.quiet) as bar:
            art = train(args.mechanism, args.runs, cfg, args.output, reducer=args.reducer, progress=bar and bar.update,
                        resume=args.resume, checkpoint_every=args.checkpoint_every, notify=_notify(args.quiet),
                        ray_address=args.ray, threads=args.threads)
    except TrainingInterrupted as exc:
        print(f"interrupted: the training state is saved in {exc.checkpoint}", file=sys.stderr)
        print("continue with the same command plus --resume", file=sys.stderr)
        return 130
    m = art.training.get("metrics", {})
    kind = "known coordinates " + ",".join(art.coordinates) if art.coordinates else "learnt coordinates"
    angles = " (angle-type: " + ",".join(str(i + 1) for i, a in enumerate(art.angles) if a) + ")" if any(art.angles) else ""
    print(f"wrote {args.output}: {art.reducer}, {art.dof} minimal coordinate(s), {kind}{angles}, dt {art.dt:g} s")
    # the training record names its loss terms (a model of another reducer has none)
    terms = ", ".join(f"{title} {m[k]:.3e}" for k, title in (m.get("term_titles") or {}).items() if k in m)
    if "train_seconds" in m:
        parts = [f"{m['train_seconds']:.1f} s"] + ([f"loss: {terms}"] if terms else [])
        parts += [f"validation {m['val_loss']:.3e}"] if "val_loss" in m else []
        parts += [f"{m['lbfgs_iterations']} L-BFGS iterations"] if m.get("lbfgs_iterations") else []
        print("  " + ", ".join(parts))
    ens = art.training.get("ensemble")
    if ens:
        print(f"  {ens['seeds']} seeds in {ens['wall_seconds']:.0f} s ({ens['slots']} at a time), kept seed {ens['kept']}:")
        for r in ens["members"]:
            if "error" in r:
                print(f"    seed {r['seed']}: failed, left out: {r['error']}")
                continue
            print(f"    seed {r['seed']}: validation {r['val_loss']:.3e}, {r['lbfgs_iterations']} L-BFGS iterations, "
                  f"{r['seconds']:.1f} s{'  <- kept' if r['kept'] else ''}")
    for name, r in (m.get("spring_law_residual") or {}).items():
        print(f"  spring '{name}': learned law, rms tension residual {100 * r:.3f} % of the recorded tension")
    if "identified_terms" in m:
        lines = m.get("identified") or ["(none: the residual is below the threshold)"]
        print("  identified terms (generalized forces in the minimal coordinates, SI units):")
        for line in lines:
            print(f"    {line}")
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from .validation.simulate import simulate_file

    summary = simulate_file(args.model, args.mechanism, args.run, args.output)
    _print_changed(summary["changed"], args.mechanism)
    print(f"wrote {args.output}: {summary['samples']} samples")
    if summary["diverged_at"] is not None:
        log.warning("the reduced model's state is not finite from t = %.6g s on (it left the range it was trained "
                    "on, or the model is broken): the rows from there on hold no values (nan)", summary["diverged_at"])
    print(f"  position NRMSE {100 * summary['nrmse']:.3f} %, max position error {summary['max_position_error']:.3e} m, "
          f"max rotation error {summary['max_rotation_error']:.3e} rad")
    left = summary["envelope_first_exit"]
    print("  stayed inside the training envelope" if left is None else f"  left the training envelope at t = {left:.3f} s")
    return 0


def _print_changed(changed: list, source: str) -> None:
    """The physical parameters a variant mechanism file changes, as a short table."""
    from .mechanics.variants import differences_table

    if changed:
        print(f"{source}: {len(changed)} physical parameter(s) differ from the trained mechanism; using the file's:")
        for line in differences_table(list(changed)):
            print(line)


def _parse_at(items: list[str]) -> dict[str, list[float]]:
    from .errors import LinearizeError

    out: dict[str, list[float]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or name not in ("q", "qd", "u") or name in out:
            raise LinearizeError(f"--at {item!r}: give each of q=..., qd=..., u=... at most once, as NAME=V1[,V2...]")
        try:
            out[name] = [float(v) for v in values.split(",")]
        except ValueError:
            raise LinearizeError(f"--at {item!r}: the values must be numbers separated by commas") from None
    return out


def _cmd_linearize(args: argparse.Namespace) -> int:
    from .control.linearize import linearize, write_linearization

    at = _parse_at(args.at)
    lin = linearize(args.model, q=at.get("q"), qd=at.get("qd"), u=at.get("u"), mechanism=args.mechanism)
    _print_changed(lin.changed, args.mechanism)
    write_linearization(lin, args.output)
    where = "static equilibrium" if lin.equilibrium else "given state"
    print(f"wrote {args.output}: {lin.A.shape[0]} states, {lin.B.shape[1]} input(s), {lin.C.shape[0]} outputs")
    print(f"  {where}: q = {[float(f'{v:.6g}') for v in lin.q]}, u = {[float(f'{v:.6g}') for v in lin.u]} "
          f"(|qdd| = {lin.residual:.2e})")
    print("  mode  frequency (Hz)  damping ratio  eigenvalue")
    for k, mode in enumerate(lin.modes(), 1):
        lam = complex(mode["real"], mode["imag"])
        print(f"  {k:>4}  {mode['frequency_hz']:>14.6g}  {mode['damping_ratio']:>13.4g}  {lam:.6g}"
              + ("" if mode["oscillatory"] else "  (not oscillatory)"))
    return 0


def _cmd_from_mujoco(args: argparse.Namespace) -> int:
    from .data.adapters.mujoco import convert_mujoco

    summary = convert_mujoco(args.model, args.trajectories, args.output)
    print(f"wrote {args.output}: mechanism '{summary['mechanism']}', {len(summary['bodies'])} bodies, "
          f"{len(summary['inputs'])} input(s), {len(summary['runs'])} run(s)")
    for kind, renamed in summary["renamed"].items():
        for old, new in renamed.items():
            old = old if old.startswith("#") else f"'{old}'"
            print(f"  MuJoCo {'body' if kind == 'bodies' else 'actuator'} {old} -> {new}")
    for run in summary["runs"]:
        loops = [lv for lv in run["loops"] if lv["active"]]
        loop = f"  loop violation {max(lv['max_distance'] for lv in loops):.2e} m" if loops else ""
        print(f"  {run['name']:<12} {run['samples']:>7} samples  dt {run['dt']:.6g} s{loop}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .errors import ExportError
    from .fmu.export import DEFAULT_BACKEND, export_fmu

    # the options that apply to FMUs only, with their defaults: export's parser leaves them None,
    # so that one given with another --format is refused rather than ignored
    fmu_only = {"backend": DEFAULT_BACKEND, "fmi": 2, "interface": "cs", "platforms": None}
    if args.format != "fmu":
        given = [name for name in fmu_only if getattr(args, name) is not None]
        if given:
            raise ExportError([f"--{name}: applies to FMUs only, not to --format {args.format}; leave it out"
                               for name in given])
    for name, default in fmu_only.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.format == "casadi":
        from .control.casadi_export import export_casadi

        if args.mechanism is not None:
            from .capabilities import VARIANT_REFUSED

            raise ExportError(f"--mechanism {args.mechanism}: {VARIANT_REFUSED['casadi']}")
        summary = export_casadi(args.model, args.output)
        print(f"wrote {args.output}: CasADi function model(q, qd, u) -> (qdd, origins), {summary['dof']} coordinate(s), "
              f"inputs {', '.join(summary['inputs']) or 'none'}; load it with casadi.Function.load")
        return 0

    if args.format == "modelica":
        from .modelica.export import export_modelica

        summary = export_modelica(args.model, args.output, args.mechanism)
        _print_changed(summary["changed"], args.mechanism)
        print(f"wrote {args.output}: Modelica model {summary['model']} ({summary['bytes'] / 1024:.0f} kB), "
              f"{summary['dof']} coordinate(s), inputs {', '.join(summary['inputs']) or 'none'}; states q, qd, "
              "the physical parameters as parameters (docs/modelica.md)")
        return 0

    summary = export_fmu(args.model, args.output, args.backend, args.fmi, args.interface, args.platforms,
                         args.mechanism)
    _print_changed(summary["changed"], args.mechanism)
    print(f"wrote {args.output}: {summary['backend']} backend, FMI {summary['fmi_version']} "
          f"{summary['interface']}, {summary['variables']} variables, {_export_check(summary)}")
    _print_platforms(summary.get("platforms", {}))
    return 0


def _print_platforms(platforms: dict) -> None:
    """The binaries an export built: platform, folder, what each loads, its glibc floor, size."""
    if not platforms:
        return
    print(f"  {'platform':<16} {'binaries/':<16} {'loads':<26} {'glibc >=':<9} {'size':>7}  checked")
    for name, b in platforms.items():
        check = max(b["max_difference"].values())
        print(f"  {name:<16} {b['folder']:<16} {', '.join(b['needed']):<26} {b['glibc'] or '-':<9} "
              f"{b['bytes'] / 1024:>5.0f} kB  {check:.1e}")


def _export_check(summary: dict) -> str:
    """What the export checked: the native C code against the model, or the ONNX graphs against torch."""
    if summary.get("native_max_difference"):
        return f"C code matches the model to {max(summary['native_max_difference'].values()):.1e}"
    if summary.get("onnx_max_difference"):
        return f"ONNX graphs match torch to {max(summary['onnx_max_difference'].values()):.1e}"
    return "no numerical check recorded"


def _print_validation(result: dict) -> None:
    problems = result["model_description_problems"]
    print(f"{result['fmu']}: model description: " + ("no problems" if not problems else f"{len(problems)} problem(s)"))
    for p in problems:
        print(f"  {p}")
    if result.get("binaries"):
        print("  binaries: " + ", ".join(
            f"{b['platform'] or b['folder']}" + (f" (glibc >= {b['glibc']})" if b["glibc"] else "")
            for b in result["binaries"]))
    print(f"  {'run':<12} {'NRMSE':>10} {'max pos err':>12} {'max rot err':>12} {'stop time':>10} {'envelope':>9} "
          f"{'err > 10 %':>10} {'wall':>7}")
    for r in result["runs"]:
        nrmse = f"{100 * r['position_nrmse']:.3f} %" if r["position_nrmse"] < float("inf") else "-"
        stop = "reached" if r["reached_stop_time"] else f"{r['stopped_at'] or 0:.3f} s"
        env = "inside" if r["envelope_flag_time"] is None else f"{r['envelope_flag_time']:.3f} s"
        big = "never" if r["error_above_10pct_time"] is None else f"{r['error_above_10pct_time']:.3f} s"
        print(f"  {r['run']:<12} {nrmse:>10} {r['max_position_error']:>10.2e} m {r['max_rotation_error']:>8.2e} rad "
              f"{stop:>10} {env:>9} {big:>10} {r['wall_time']:>5.1f} s")
        if r["error"] or not r["reached_stop_time"]:
            own = [m for m in r["messages"] if m.startswith("mc2fmu:") and "envelope at" not in m]
            why = own[-1].splitlines()[0] if own else (r["error"] or "no message")
            print(f"      stopped: {why}")
    if result.get("report"):
        print(f"  report: {result['report']}")


def _threads(text: str) -> int:
    """--threads: a whole number of threads, 1..MAX_THREADS."""
    from .parallel.executors import MAX_THREADS

    if not (text.strip().isascii() and text.strip().isdecimal()) or not 1 <= int(text) <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of threads from 1 to {MAX_THREADS}")
    return int(text)


def _seconds(text: str) -> float:
    """An option's number of seconds: finite and > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def _cmd_validate(args: argparse.Namespace) -> int:
    import json

    from .files import json_safe
    from .validation.validate import validate_fmu

    result = validate_fmu(args.fmu, args.mechanism, args.runs, args.report, timeout=args.timeout)
    if result["parameters"] and not args.json:
        print(f"{args.mechanism}: setting the FMU's parameters "
              + ", ".join(f"{k} = {v:.6g}" for k, v in result["parameters"].items()))
    if args.json:
        print(json.dumps(json_safe(result), indent=2))
    else:
        _print_validation(result)
    return 1 if result["model_description_problems"] else 0


def _stage(quiet: bool, bar: "_progress_bar | None" = None):
    """Print a pipeline stage (``==> ...``); a progress bar of the stage before is closed first,
    so it does not redraw under the next stage's output."""
    def say(s: str) -> None:
        if bar is not None:
            bar.close()
        print(f"==> {s}", file=sys.stderr)

    return (lambda s: None) if quiet else say


def _print_convert(summary: dict) -> None:
    m = summary["training"]["metrics"]
    print(f"wrote {summary['fmu']} (model {summary['model_dir']}, report {summary['report']})")
    print(f"  training: {m['train_seconds']:.1f} s; export: {_export_check(summary['export'])}")
    if summary["validation"] is not None:
        _print_validation(summary["validation"])


def _cmd_convert(args: argparse.Namespace) -> int:
    from .pipeline import convert

    cfg = _train_config(args)
    with _progress_bar(args.quiet) as bar:
        summary = convert(args.mechanism, args.runs, cfg, args.output, args.validate, args.backend,
                          fmi_version=args.fmi, interface=args.interface, reducer=args.reducer,
                          platforms=args.platforms, train_progress=bar and bar.update, stage=_stage(args.quiet, bar), notify=_notify(args.quiet))
    _print_convert(summary)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .pipeline import demo

    with _progress_bar(args.quiet) as bar:
        summary = demo(args.mechanism, args.output, train_progress=bar and bar.update, stage=_stage(args.quiet, bar))
    _print_convert(summary)
    return 0


class _progress_bar:
    """A status line fed by training progress entries; it appears at the first entry, so
    stages before training (e.g. `demo`'s simulations) do not count.

    It shows no time left: L-BFGS stops when its stopping rule holds, rarely at the iteration
    cap, so the line shows what the rule watches instead, the best validation loss and how far
    it fell over the rule's window (the run stops when that is under --lbfgs-tol, or when the
    loss reaches --lbfgs-floor and --lbfgs-check passes)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.bars: dict = {}  # one line per seed (train --seeds), else one

    def __enter__(self) -> "_progress_bar | None":
        return None if self.quiet else self

    def update(self, e: dict) -> None:
        key = e.get("seed")
        if key not in self.bars:
            from tqdm import tqdm

            # tqdm writes the postfix as ", <postfix>": "training 00:12, lbfgs 200 | loss ..."
            self.bars[key] = tqdm(total=None, bar_format="{desc} {elapsed}{postfix}", file=sys.stderr,
                                  desc="training" if key is None else f"seed {key}", position=len(self.bars))
        line = f"done: best val {e['val']:.2e} after {e['iter']} L-BFGS iterations" if e.get("stage") == "done" \
            else progress_line(e)
        self.bars[key].set_postfix_str(line, refresh=True)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars = {}

    def __exit__(self, *exc):
        self.close()
        return False


def progress_line(e: dict) -> str:
    """The status line of a training progress entry: the stage and its iteration, the losses
    and, for L-BFGS, what its stopping rule watches."""
    head = f"{e.get('stage', '')} {e.get('iter', '')}".strip()
    if e.get("triplets"):  # L-BFGS's share of the training triplets
        head += f" on {e['triplets']} triplets"
    parts = [head]
    terms = " ".join(f"{label} {e[k]:.1e}" for k, label in (e.get("labels") or {}).items() if k in e)
    if e.get("loss") is not None:
        parts.append(f"loss {e['loss']:.2e}" + (f" ({terms})" if terms else ""))
    if "window" in e and e.get("best_fit") is not None:  # L-BFGS: what its stopping rule watches
        rule = f"best val fit {e['best_fit']:.2e}"
        if e.get("floor"):
            rule += f" (stops at {e['floor']:g})"
        fall = e.get("fall")
        if fall is not None:
            rule += f", fell {100 * fall:.1f} % over the last {e['window']} it"
            if e.get("tol"):
                rule += f" (stops under {100 * e['tol']:g} %)"
        parts.append(rule)
        if e.get("check") is not None:  # the floor's check (--lbfgs-check)
            parts.append(f"training runs' rollout NRMSE {100 * e['check']:.3g} %")
    elif e.get("val") is not None:
        parts.append(f"val {e['val']:.2e}")
    return " | ".join(parts)


class _CliLogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from .errors import for_terminal

        return "\n".join(for_terminal(record.getMessage(), f"{record.levelname.lower()}: "))


def _written_beside(command: str, output: Path) -> list[tuple[Path, str]]:
    """The paths a command writes for ``-o OUTPUT``, with what each is (their names are checked
    up front): the output, and beside it ``train``'s checkpoint and seed folders, ``convert``'s
    model and report directories and the model's checkpoint."""
    from .pipeline import side_paths
    from .reducers.base import checkpoint_path

    paths = [(output, "")]
    if command == "train":
        paths += [(checkpoint_path(output), "the training checkpoint's name"),
                  (output.with_name(output.name + ".seeds"), "the seeds folder's name")]
    elif command == "convert":
        model, report = side_paths(output)
        paths += [(model, "the model directory's name"), (report, "the report directory's name"),
                  (checkpoint_path(model), "the training checkpoint's name")]
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CliLogFormatter())
    level = logging.ERROR if args.quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    # the package's logger prints to stderr for the duration of the command only, so that
    # main() called in-process (tests, scripts) leaves the caller's logging as it was
    logger = logging.getLogger("mc2fmu")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False

    from .errors import Mc2fmuError, problem_lines

    try:
        output = getattr(args, "output", None)
        if output is not None:  # a name the file system refuses is refused before any work
            from .errors import OutputError
            from .files import output_name_problem

            for path, what in _written_beside(args.command, Path(output)):
                problem = output_name_problem(path)
                if problem:
                    raise OutputError(f"{output}: {problem}" + (f" (in {what}, {path.name[-30:]})" if what else ""))
        return int(args.func(args) or 0)
    except Mc2fmuError as exc:
        for line in problem_lines(exc.problems):
            print(line, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
