"""The ``dapo`` command: a thin shell over dapo.config and dapo.trainer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dapo.cli.ablate import ABLATION_TASKS, DEFAULT_TASK
from dapo.config import ConfigError, builtin_config_path, load_config
from dapo.errors import UserError

EPILOG = """\
configuration:
  CONFIG is a YAML file or the name of a shipped config (default, dapo_qwen2.5_32b,
  qwen2.5_1.5b_1gpu). With no CONFIG, `dapo train` runs the embedded default: the built-in
  arithmetic task and tiny base model, a few minutes on a laptop CPU.
  Any field can be overridden with dotted key=value pairs, e.g.
      dapo train trainer.lr=1e-5 rollout.n=8 algorithm.clip_ratio_high=0.28
  Every field is documented in src/dapo/config/schema.py: `dapo config --explain KEY` shows a
  field's documentation (`--explain trainer` a section's, `--explain` all), `dapo config` prints
  the resolved YAML; the resolved config of a run is saved as RUN_DIR/config.yaml.
"""


def split_config_args(args: list[str]) -> tuple[list[str], list[str]]:
    """Separate YAML files / shipped config names from key=value overrides."""
    files, overrides = [], []
    for arg in args:
        if "=" in arg:
            overrides.append(arg)
        elif arg.endswith((".yaml", ".yml")) or Path(arg).is_file():
            files.append(arg)
        else:
            files.append(str(builtin_config_path(arg)))
    return files, overrides


def resolve(args: list[str], default: str | None = "default"):
    files, overrides = split_config_args(args)
    if not files and default:
        files = [str(builtin_config_path(default))]
    return load_config(files, overrides)


def cmd_train(ns: argparse.Namespace) -> int:
    from dapo.trainer import Trainer, print_summary

    cfg = resolve(ns.config)
    summary = Trainer(cfg).train()
    print_summary(summary)
    return 0


def cmd_eval(ns: argparse.Namespace) -> int:
    from dapo.trainer import evaluate_model

    cfg = resolve(ns.config + [f"model.path={ns.model}"])
    metrics = evaluate_model(cfg)
    for key, value in metrics.items():
        print(f"{key:32s} {value:.4f}")
    return 0


def cmd_plot(ns: argparse.Namespace) -> int:
    from dapo.cli.plot import plot_run

    out = plot_run(ns.run_dir, ns.output)
    print(f"wrote {out}")
    return 0


def cmd_config(ns: argparse.Namespace) -> int:
    import yaml

    from dapo.config.explain import explain
    from dapo.config.loading import config_to_dict

    cfg = resolve(ns.config)
    if ns.explain is not None:
        try:
            print(explain(cfg, ns.explain))
        except ValueError as error:
            raise ConfigError(str(error)) from error
        return 0
    print(yaml.safe_dump(config_to_dict(cfg), sort_keys=False), end="")
    return 0


def cmd_plan(ns: argparse.Namespace) -> int:
    from dapo.cli.plan import plan

    print(plan(resolve(ns.config), ns.params, ns.device_gib))
    return 0


def cmd_ablate(ns: argparse.Namespace) -> int:
    from dapo.cli.ablate import run_ablation

    run_ablation(seeds=ns.seeds, steps=ns.steps, output_dir=ns.output_dir, overrides=ns.config, task=ns.task)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dapo",
        description="DAPO reinforcement learning from verifiable rewards for Hugging Face causal LMs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cfg_help = "[CONFIG.yaml | shipped-name] [key=value ...]"

    train = sub.add_parser("train", help="run DAPO training", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    train.add_argument("config", nargs="*", metavar="ARG", help=cfg_help)
    train.set_defaults(func=cmd_train)

    ev = sub.add_parser("eval", help="avg@k / pass@k / maj@k of a model or checkpoint on data.eval_files")
    ev.add_argument("model", help="HF model directory, run checkpoint directory, or 'builtin'")
    ev.add_argument("config", nargs="*", metavar="ARG", help=cfg_help)
    ev.set_defaults(func=cmd_eval)

    plot = sub.add_parser("plot", help="PNG report of a run: reward, accuracy, entropy, length, clipping, filtering")
    plot.add_argument("run_dir")
    plot.add_argument("-o", "--output", default=None, help="PNG path (default RUN_DIR/report.png)")
    plot.set_defaults(func=cmd_plot)

    show = sub.add_parser("config", help="print the resolved config, or explain its fields")
    show.add_argument("config", nargs="*", metavar="ARG", help=cfg_help)
    show.add_argument("--explain", nargs="?", const="", default=None, metavar="KEY",
                      help="document KEY (e.g. trainer.lr), every field of a section (trainer), or all "
                           "fields, with their types and values in this config")
    show.set_defaults(func=cmd_config)

    dry = sub.add_parser("plan", help="where a run goes and a per-device memory estimate, without a cluster")
    dry.add_argument("config", nargs="*", metavar="ARG", help=cfg_help)
    dry.add_argument("--params", type=float, default=None,
                     help="parameter count when model.path is not on this machine (e.g. 32.8e9)")
    dry.add_argument("--device-gib", type=float, default=80.0, help="memory of one device (default 80, an H100)")
    dry.set_defaults(func=cmd_plan)

    ablate = sub.add_parser("ablate", help="the paper's ablation (naive GRPO -> full DAPO) on a built-in task")
    ablate.add_argument("--seeds", type=int, default=3)
    ablate.add_argument("--steps", type=int, default=30, help="training steps per run (equal compute)")
    ablate.add_argument("--task", default=DEFAULT_TASK, choices=sorted(ABLATION_TASKS),
                        help="built-in task and base model (see dapo.cli.ablate.ABLATION_TASKS)")
    ablate.add_argument("--output-dir", default="runs/ablation")
    ablate.add_argument("config", nargs="*", metavar="ARG", help="key=value overrides applied to every run")
    ablate.set_defaults(func=cmd_ablate)
    return parser


def main(argv: list[str] | None = None) -> int:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-file load/save bars would drown our own progress bar
    parser = build_parser()
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if ns.command is None:
        parser.print_help()
        return 0
    try:
        return ns.func(ns)
    except (UserError, FileNotFoundError) as error:
        print(f"dapo {ns.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
