"""Tasks are objects (ldpfed.tasks): no code outside the registry's entries branches on a task's
name, the config's names agree with the registry, and functions stay short.

The name check parses every module of ldpfed/ (but ldpfed/tasks/), clients/, server/, simulations/
and scripts/ and fails on a comparison of something named like a task (`task`, `config.run.task`,
`summary["task"]`) with a task's name or a tuple of them (`==`, `!=`, `in`, `not in`). Tables
keyed by task name in the CLI (its choice lists: which command handles which task) are lookups,
not branches, and are allowed. Fabricated sources show that the check can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ldpfed.config as config_module
import ldpfed.tasks as tasks
from ldpfed.config import Config
from ldpfed.validation import LDPValueError

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("ldpfed", "clients", "server", "simulations", "scripts")
REGISTRY = ROOT / "ldpfed" / "tasks"
NAMES = frozenset(tasks.available())
MAX_BODY_LINES = 80


def _names(node: ast.AST) -> set[str] | None:
    """The task names a comparison operand spells (a string or a tuple/list/set of strings), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return set(values) if len(values) == len(node.elts) else None
    return None


def task_branches(source: str) -> list[int]:
    """Lines comparing something named like a task with a task's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        spelled = [_names(operand) for operand in operands]
        named = [spell for spell in spelled if spell is not None]
        if not any(spell & NAMES and spell <= NAMES | {""} for spell in named):
            continue
        if any(spell is None and "task" in ast.unparse(operand) for operand, spell in zip(operands, spelled)):
            found.append(node.lineno)
    return found


def scanned_modules():
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if REGISTRY not in path.parents:
                yield path


def test_no_module_branches_on_a_task_name():
    found = [
        f"{path.relative_to(ROOT)}:{line}" for path in scanned_modules() for line in task_branches(path.read_text())
    ]
    assert not found, f"branches on a task's name outside ldpfed/tasks (ask the task's entry): {found}"


@pytest.mark.parametrize(
    "source",
    [
        'if config.run.task == "train":\n    pass\n',
        'x = 1 if task != "mean" else 2\n',
        'if task in ("mean", "frequency"):\n    pass\n',
        'if summary.get("task") == "train":\n    pass\n',
        'if "frequency" == self.config.run.task:\n    pass\n',
    ],
)
def test_the_name_check_catches_a_branch(source):
    assert task_branches(source) == [1]


@pytest.mark.parametrize(
    "source",
    [
        'if aggregator == "mean":\n    pass\n',  # an aggregator named mean is not the task
        "if task in PLAN_TASKS:\n    pass\n",  # a CLI choice list
        'RUNNERS = {"mean": 1, "train": 2}\n',  # a table keyed by task name
        'if config.run.task == "other":\n    pass\n',
    ],
)
def test_the_name_check_passes_what_is_not_a_branch_on_a_task(source):
    assert task_branches(source) == []


def test_the_configs_names_are_the_registrys():
    assert set(config_module.TASKS) == NAMES
    assert set(config_module.DEFAULT_DATA) == NAMES


def test_each_entry_owns_its_options_and_a_foreign_flag_is_named():
    for name in NAMES:
        entry = tasks.get(name)
        assert entry.name == name and entry.sends and entry.unit and entry.epsilon_unit
        foreign = tasks.foreign_options(name)
        assert not set(foreign) & set(entry.options)
        for option in foreign:
            assert tasks.foreign_flags(name, {option: 1}) == ["--" + option.replace("_", "-")]
    assert tasks.foreign_flags("mean", {"model": "cnn", "domain": "-1,1"}) == ["--model"]


def test_a_task_check_runs_only_through_the_registry():
    """`Config.validated` checks what every task shares; the task's own check is its entry's."""
    config = Config().with_options({"task": "mean", "perturbation": "ldpvec"})
    config.validated()  # shared checks pass
    with pytest.raises(LDPValueError, match="--task train only"):
        tasks.validated(config)


def function_body_lengths(source: str) -> list[tuple[str, int, int]]:
    """(name, line, body lines) of every function: from its first statement after the docstring to
    its end (a command's option declarations in its signature are declarations, not logic)."""
    lengths = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            lengths.append((node.name, node.lineno, node.end_lineno - body[0].lineno + 1))
    return lengths


def test_no_function_body_is_longer_than_80_lines():
    long = [
        f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for package in ("ldpfed", "clients", "server", "simulations", "wire")
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, line, length in function_body_lengths(path.read_text())
        if length > MAX_BODY_LINES
    ]
    assert not long, long


def test_the_length_check_can_fail():
    source = "def f():\n    '''doc'''\n" + "    x = 1\n" * (MAX_BODY_LINES + 1)
    assert function_body_lengths(source) == [("f", 1, MAX_BODY_LINES + 1)]
