"""A program of one schedule holding one CPU task, for tests that ask about a task body."""

from dhir.dialects.dhir import TaskOp
from dhir.ir.tasks import task_ids
from dhir.ir.text import parse_string


def single_task(args: str, body: str) -> TaskOp:
    """The task of `func.func @main(args)`, which lists every argument and runs `body`."""
    names = ", ".join(a.split(":")[0].strip() for a in args.split(","))
    text = f"""
func.func @main({args}) {{
  dhir.schedule {names} {{
    %t = dhir.target {{kind = "cpu"}}
    %k = dhir.task %t, {names} {{
{body}
    }}
  }}
  return
}}
"""
    (task,) = task_ids(parse_string(text))
    return task
