"""The ``dapo`` command: a thin shell over dapo.config and dapo.trainer."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

from dapo import __version__
from dapo.cli.ablate import ABLATION_TASKS, DEFAULT_TASK
from dapo.cli.args import (
    SAVED_CONFIG,
    config_arg_kind,
    is_builtin_model,
    is_config_arg,
    model_path_override,
    named_folder,
    positive_int,
    resolve,
    shipped_config_names,
)
from dapo.cli.eval_dir import default_eval_dir, earlier_evaluation
from dapo.config import AlgorithmConfig, ConfigError, DAPOConfig
from dapo.config.loading import yaml_text
from dapo.errors import UserError
from dapo.warning_format import warning_format

EPILOG = """\
configuration:
  CONFIG is a YAML file or the name of a shipped config (default, dapo_recipe, dapo_qwen2.5_32b,
  qwen2.5_1.5b_1gpu). With no CONFIG, `dapo train` runs the embedded default (the built-in
  arithmetic task and tiny base model, a minute or two on a laptop CPU), or with a model.path of
  your own the paper's recipe (dapo_recipe). A CONFIG file is layered on the schema's defaults
  (the paper's settings: 20480-token responses, the DAPO prompt template); several are layered
  in order, so `dapo train default my.yaml` starts from the embedded default's instead.
  Any field can be overridden with dotted key=value pairs, e.g.
      dapo train trainer.lr=1e-5 rollout.n=8 algorithm.clip_ratio_high=0.28
  Every field is documented in src/dapo/config/ (schema.py and its section modules): `dapo
  config --explain KEY` shows a field's documentation (`--explain trainer` a section's,
  `--explain` all), `dapo config` prints the resolved YAML; the resolved config of a run is saved
  as RUN_DIR/config.yaml.
"""


def cmd_train(ns: argparse.Namespace) -> int:
    from dapo.preflight import check_run

    cfg = resolve(ns.config)
    with warnings.catch_warnings():  # Trainer's own check_run says them, once (filter changes
        warnings.simplefilter("ignore")  # in between reset the registry that keeps them once)
        check_run(cfg)  # every problem with files, device, extras and output_dir, before anything loads
    from dapo.trainer import Trainer, print_summary

    try:
        summary = Trainer(cfg).train()
    except BaseException as error:
        if (code := _stopped_by_signal(error)) is None:
            raise
        print(f"dapo train: {_stopped_by(code)}; "
              f"{_resume_note(cfg)}", file=sys.stderr)
        return code
    print_summary(summary)
    return 0


def _stopped_by_signal(error: BaseException) -> int | None:
    """The exit code of the Ctrl-C (130), SIGTERM or SIGHUP (exit_on_termination) behind ``error``:
    it, or what it was raised while handling (torch.save interrupted mid-file raises an error of its
    own); None for anything else."""
    for _ in range(8):  # a short chain: what a signal interrupted, and what that raised
        if isinstance(error, KeyboardInterrupt):
            return 130
        if isinstance(error, SystemExit) and error.code in (128 + signal.SIGTERM, 128 + getattr(signal, "SIGHUP", 1)):
            return int(error.code)
        if (error := error.__context__) is None:  # type: ignore[assignment]
            return None
    return None


def _stopped_by(code: int) -> str:
    """'stopped by Ctrl-C' / 'stopped by SIGTERM', for the exit code :func:`_stopped_by_signal` gave."""
    return f"stopped by {'Ctrl-C' if code == 130 else signal.Signals(code - 128).name}"


def _resume_note(cfg: DAPOConfig) -> str:
    """Where an interrupted run goes on from when its command is run again."""
    from dapo.trainer.checkpoint import how_to_resume, list_checkpoints

    newest = list_checkpoints(cfg.output_dir)
    if not newest:
        return f"no checkpoint in {cfg.output_dir} yet: the same command starts over"
    return f"{how_to_resume(cfg.checkpoint.resume)} from its newest checkpoint, {newest[-1]}"


# The placement settings an evaluation sets to 1: it runs in this process, on one device.
ONE_PROCESS = ("resources.nnodes", "resources.devices_per_node", "trainer.sequence_parallel_size")
# An evaluation computes no loss or advantage and writes no checkpoint: the run's algorithm plugins are
# not imported (a file moved since, or names registered from Python, refused the checkpoint), its names
# take the defaults, and checkpoint.keep_best (whose @K an eval.k=... override would refuse) is off.
UNTRAINED_SETTINGS = ("algorithm.plugins=[]", "checkpoint.keep_best=null", *(f"algorithm.{f.name}={f.default}"
                      for f in fields(AlgorithmConfig) if f.name in ("advantage", "policy_loss", "loss_agg_mode")))


def cmd_eval(ns: argparse.Namespace) -> int:
    from dapo.preflight import check_run, output_problems

    args = list(ns.config)
    ns.model = os.path.realpath(ns.model) if os.path.islink(ns.model.rstrip(os.sep)) else ns.model  # checkpoints/best moves
    if config_arg_kind(ns.model) == "override" and not Path(ns.model).exists():  # (a run named lr=1e-5 is a model)
        raise UserError(f"dapo eval MODEL [CONFIG] [key=value ...]: name the model first ({ns.model!r} is an override)")
    is_config = config_arg_kind(ns.model) == "shipped" or ns.model.endswith((".yaml", ".yml"))
    if is_config and not Path(ns.model).is_dir():  # `dapo eval CONFIG MODEL`
        raise UserError(f"dapo eval MODEL [CONFIG] [key=value ...]: name the model first ({ns.model!r} is a config)")
    if not is_builtin_model(ns.model) and not Path(ns.model).expanduser().is_dir():  # alone: the notes would follow
        from dapo.preflight import PreflightError, missing_model_problem

        raise PreflightError([missing_model_problem(ns.model)])
    if (Path(ns.model) / "checkpoints").is_dir() and not (Path(ns.model) / "config.json").exists():
        from dapo.trainer.checkpoint import list_checkpoints

        newest = list_checkpoints(ns.model)
        example = newest[-1] if newest else Path(ns.model) / "checkpoints" / "step-N"
        raise UserError(f"{ns.model} is a run directory: name one of its checkpoints, e.g. dapo eval {example}")
    if Path(ns.model).resolve().name == "checkpoints" and not (Path(ns.model) / "config.json").exists():
        from dapo.trainer.checkpoint import list_checkpoints

        if newest := list_checkpoints(Path(ns.model).resolve().parent):  # RUN_DIR/checkpoints named
            raise UserError(f"{ns.model} is a run's checkpoints folder: name one of its checkpoints, e.g. "
                            f"dapo eval {Path(ns.model) / newest[-1].name}")
    saved = Path(ns.model) / SAVED_CONFIG
    if saved.is_file():  # the run's own, under any CONFIG and key=value given (a later file wins)
        print(f"dapo eval: config: {saved}, the run's own (a CONFIG or key=value overrides it)", file=sys.stderr)
        args = [str(saved), *args]
    # evaluation runs in this process, whatever placement the run trained with (its sequence
    # parallelism, which only splits a training forward, included), and scores before any overlong
    # shaping (whose buffer must otherwise be shorter than an evaluation's rollout.max_response_length)
    if (given := model_path_override([arg for arg in ns.config if config_arg_kind(arg) == "override"])) is not None:
        raise UserError(f"dapo eval evaluates MODEL ({ns.model}), not model.path={given}: dapo eval {given} ...")
    if placed := [arg for arg in ns.config if arg.startswith(tuple(f"{key}=" for key in ONE_PROCESS))]:
        print(f"dapo eval: evaluates in this process, on one device: {' '.join(placed)} not used", file=sys.stderr)
    model_path = f"model.path={yaml_text(str(ns.model))}"
    cfg = resolve([*args, model_path, *(f"{key}=1" for key in ONE_PROCESS), "algorithm.overlong_soft_punishment=false",
                   *UNTRAINED_SETTINGS], "eval")
    save_dir = Path(ns.save_dir) if ns.save_dir is not None else default_eval_dir(Path(ns.model), saved.is_file())
    if not cfg.data.eval_files:  # before the model loads; with what is wrong with the model (a mistyped path)
        from dapo.preflight import PreflightError, model_problems
        from dapo.trainer.evaluate import NO_EVAL_DATA

        raise PreflightError([*model_problems(cfg), NO_EVAL_DATA])
    check_run(cfg, write_output=False, train_data=False)
    if problems := output_problems(save_dir, 0, key="--save-dir"):
        raise UserError(problems[0])
    if ns.save_dir and (earlier := earlier_evaluation(save_dir)):
        raise UserError(f"--save-dir {save_dir} holds an earlier evaluation ({', '.join(earlier)}), which this one "
                        "would replace: give another directory, or remove those files first")
    from dapo.trainer import evaluate_model

    result = evaluate_model(cfg, save_dir, progress=True)
    for key, value in result.metrics.items():
        print(f"{key:40s} {value:.4f}")
    print(f"{result.num_problems} problems x k={result.k}; every sample in {save_dir / 'generations.jsonl'}")
    return 0


def cmd_plot(ns: argparse.Namespace) -> int:
    from dapo.cli.plot import plot_run

    out = plot_run(ns.run_dir, ns.output)
    print(f"wrote {out}")
    return 0


def cmd_config(ns: argparse.Namespace) -> int:

    from dapo.config.explain import explain
    from dapo.config.loading import config_to_dict, config_yaml

    if ns.explain and is_config_arg(ns.explain):
        # `--explain KEY` took a CONFIG or key=value as its KEY: it is one of those, explain all
        ns.config, ns.explain = [*ns.config, ns.explain], ""
    cfg = resolve(ns.config, "config")
    if ns.explain is not None:
        try:
            print(explain(cfg, ns.explain))
        except ValueError as error:
            raise ConfigError(str(error)) from error
        return 0
    print(config_yaml(config_to_dict(cfg)), end="")
    return 0


def cmd_plan(ns: argparse.Namespace) -> int:
    from dapo.cli.plan import plan

    if not all(math.isfinite(x) and x > 0 for x in (ns.device_gib, 1.0 if ns.params is None else ns.params)):
        raise UserError("--params and --device-gib must be finite numbers > 0")
    if ns.params is not None and not 1e6 <= ns.params <= 1e14:  # 32.8 for 32.8e9 (a 33-parameter model fits anywhere)
        raise UserError(f"--params {ns.params:g} is a count of parameters, " + (f"not billions: did you mean {ns.params:g}e9?"
                        if ns.params < 1e6 else "more than any model has (~2e12 the largest): a 32.8B model is 32.8e9"))
    estimate = plan(resolve(ns.config, "plan"), ns.params, ns.device_gib)
    print(estimate)
    return 1 if "DOES NOT FIT" in estimate or "DOES NOT RUN" in estimate else 0  # a script stops before it asks for a cluster


def cmd_ablate(ns: argparse.Namespace) -> int:
    from dapo.cli.ablate import run_ablation

    run_ablation(seeds=ns.seeds, steps=ns.steps, output_dir=ns.output_dir, overrides=ns.config, task=ns.task,
                 fresh=ns.fresh)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dapo",
        description="DAPO reinforcement learning from verifiable rewards for Hugging Face causal LMs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also DAPO_DEBUG=1)")
    parser.add_argument("--version", action="version", version=f"dapo-rl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cfg_help = f"[CONFIG.yaml | {' | '.join(shipped_config_names())}] [key=value ...]"

    train = sub.add_parser("train", help="run DAPO training", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("config", nargs="*", default=[], metavar="ARG", help=cfg_help)
    train.set_defaults(func=cmd_train)

    ev = sub.add_parser("eval", help="avg@k / pass@k / maj@k of a model or checkpoint on data.eval_files")
    ev.add_argument("model", help="HF model directory, run checkpoint directory (its run's config is used), "
                                  "or 'builtin'")
    ev.add_argument("config", nargs="*", default=[], metavar="ARG", help=cfg_help)
    ev.add_argument("--save-dir", type=named_folder, default=None,
                    help="where generations.jsonl, metrics.json and config.yaml go (default: RUN_DIR/eval/step-N "
                         "for a checkpoint, else runs/eval/NAME; step-N-2, -3, ... when an earlier evaluation is there; "
                         "a DIR holding one is refused)")
    ev.set_defaults(func=cmd_eval)

    plot = sub.add_parser("plot", help="PNG report of a run: reward, accuracy, entropy, length, clipping, filtering")
    plot.add_argument("run_dir", help="a run's output_dir (it holds metrics.jsonl)")
    plot.add_argument("-o", "--output", type=named_folder, default=None, help="PNG path (default RUN_DIR/report.png)")
    plot.set_defaults(func=cmd_plot)

    show = sub.add_parser("config", help="print the resolved config, or explain its fields")
    show.add_argument("config", nargs="*", default=[], metavar="ARG", help=cfg_help)
    show.add_argument("--explain", nargs="?", const="", default=None, metavar="KEY",
                      help="document KEY (e.g. trainer.lr), every field of a section (trainer), or all "
                           "fields, with their types and values in this config")
    show.set_defaults(func=cmd_config)

    dry = sub.add_parser("plan", help="where a run goes and a per-device memory estimate, without a cluster "
                                      "(exit status 1 when it does not fit)")
    dry.add_argument("config", nargs="*", default=[], metavar="ARG", help=cfg_help)
    dry.add_argument("--params", type=float, default=None,
                     help="parameter count when model.path is not on this machine (e.g. 32.8e9)")
    dry.add_argument("--device-gib", type=float, default=80.0, help="memory of one device (default 80, an H100)")
    dry.set_defaults(func=cmd_plan)

    ablate = sub.add_parser("ablate", help="the paper's ablation (naive GRPO -> full DAPO) on a built-in task")
    ablate.add_argument("--seeds", type=positive_int, default=3, help="seeds per variant, 0 to N-1 (default: 3)")
    ablate.add_argument("--steps", type=positive_int, default=30, help="each run's generation budget, in plain steps: steps x prompts_per_step generated groups "
                        "(equal compute; a dynamic-sampling run makes fewer training steps of it)")
    ablate.add_argument("--task", default=DEFAULT_TASK, choices=sorted(ABLATION_TASKS),
                        help="built-in task and base model (see dapo.cli.ablate.ABLATION_TASKS)")
    ablate.add_argument("--output-dir", type=named_folder, default="runs/ablation",
                        help="where the runs, tables and plot go (default: runs/ablation)")
    ablate.add_argument("--fresh", action="store_true",
                        help="rerun every run (default: reuse the runs that finished with the same config)")
    ablate.add_argument("config", nargs="*", default=[], metavar="ARG", help="key=value overrides applied to every run")
    ablate.set_defaults(func=cmd_ablate)
    for command in sub.choices.values():  # `dapo train --debug` as well as `dapo --debug train`
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.set_defaults(command_parsers=sub.choices)  # (an error about a command's arguments is said by its parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns, extra = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if ns.command in RANK_STARTING_COMMANDS and (launcher := multi_process_launcher(os.environ)) is not None:
        print(f"dapo {ns.command}: error: {launcher}", file=sys.stderr)  # (every copy says it: nothing else runs)
        return 2
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-file load/save bars would drown our own progress bar
    # CONFIGs and key=value overrides after an option (`dapo plan CFG --params 32.8e9 a.b=1`) join the others
    if extra and hasattr(ns, "config") and all(is_config_arg(arg) and not arg.startswith("-") for arg in extra):
        ns.config = [*ns.config, *extra]
    elif extra:
        options = [arg for arg in extra if arg.startswith("-")]
        hint = ("; settings are key=value (trainer.lr=1e-6) and a CONFIG a file or a shipped config's name, "
                f"neither an option ({options[0]})" if options and hasattr(ns, "config") else "")
        if "--explain" in options and ns.command not in (None, "config"):  # (the help of train names it)
            hint += f"; a field's documentation is `dapo config --explain [KEY] [CONFIG]`, not `dapo {ns.command} --explain`"
        ns.command_parsers.get(ns.command, parser).error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    if ns.command is None:
        parser.print_help()
        return 0
    debug = ns.debug or os.environ.get("DAPO_DEBUG", "") not in ("", "0")
    previous_handlers = exit_on_termination()
    previous_format = warnings.formatwarning
    if not debug:
        warnings.formatwarning = warning_format(ns.command, previous_format)
    try:
        return ns.func(ns)
    except (KeyboardInterrupt, SystemExit) as error:  # `dapo train` says its own, with where it resumes
        if debug or (code := _stopped_by_signal(error)) is None:
            raise
        print(f"dapo {ns.command}: {_stopped_by(code)}", file=sys.stderr)
        return code
    except BrokenPipeError:  # `dapo config --explain | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except (UserError, OSError) as error:  # the user's to fix: a config value, a file, a full disk
        if debug:
            raise
        lines = str(error).splitlines() if isinstance(error, UserError) else [_os_error_line(error)]
        for line in lines or [type(error).__name__]:
            print(f"dapo {ns.command}: error: {line}", file=sys.stderr)
        print(f"(dapo --debug {ns.command} ... shows the traceback)", file=sys.stderr)
        return 2
    finally:  # main() called from Python (a notebook, a test) leaves the caller's handlers as they were
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        warnings.formatwarning = previous_format


# the commands that load a model: under torchrun, each of its N copies would run one whole, 1-rank
# run of its own (the copies of `dapo train` then fought over output_dir's lock)
RANK_STARTING_COMMANDS = ("train", "eval", "ablate")
# what torchrun (torch.distributed elastic) sets in each process it starts, beside WORLD_SIZE
_LAUNCHER_VARIABLES = ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def multi_process_launcher(environ: Any) -> str | None:
    """Why this process must not run: torchrun (or another torch.distributed launcher) started it
    as one of WORLD_SIZE > 1 copies, while dapo-rl starts its own policy ranks (on Ray) from one
    command; None otherwise (WORLD_SIZE=1, as `torchrun --nproc_per_node 1`, is one run)."""
    try:
        world_size = int(environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return None
    found = [name for name in _LAUNCHER_VARIABLES if name in environ]
    if world_size <= 1 or not found:
        return None
    by = "torchrun" if "TORCHELASTIC_RUN_ID" in environ else "a torch.distributed launcher (torchrun?)"
    return (f"started by {by} as one of WORLD_SIZE={world_size} processes ({found[0]} is set): dapo-rl starts "
            "its own policy ranks, one per device, on Ray. Launch it once, without torchrun, with "
            "resources.devices_per_node=N (on a Ray cluster of several nodes also resources.nnodes=M "
            "resources.ray_address=auto; see the README's Scale out)")


def exit_on_termination() -> dict[int, Any]:
    """SIGTERM (a scheduler, `timeout`, `kill`) and SIGHUP (a closed terminal) end the command as
    Ctrl-C does, by unwinding: the trainer then closes its reward workers and what their functions
    started, which lead their own process groups and get no signal sent to this one. A second
    signal ends the process at once (a run on Ray keeps this handler over ray.init's). Returns the
    handlers replaced."""

    def unwind(signum: int, _frame: object) -> None:
        signal.signal(signum, signal.SIG_DFL)
        raise SystemExit(128 + signum)

    replaced: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():  # (signal.signal's own rule)
        for name in ("SIGTERM", "SIGHUP"):  # (no SIGHUP on Windows)
            if hasattr(signal, name):
                replaced[getattr(signal, name)] = signal.signal(getattr(signal, name), unwind)
    return replaced


def _os_error_line(error: OSError) -> str:
    """'No space left on device: runs/x/checkpoints/...' rather than '[Errno 28] ...'."""
    where = f": {error.filename}" if error.filename else ""
    return f"{error.strerror or error}{where}"


if __name__ == "__main__":
    sys.exit(main())
