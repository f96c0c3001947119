"""A pass's failure at an op, reported at the op's source location."""

from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException


class PassFailedAt(PassFailedException):
    """A pass cannot handle `op`; reported at the op's source location."""

    def __init__(self, op: Operation, message: str) -> None:
        super().__init__(message)
        self.op = op
