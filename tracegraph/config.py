"""Environment switches, read in one place."""
from __future__ import annotations

import logging
import os

BACKEND = "TRACEGRAPH_BACKEND"      # auto | cuda | sim
LOGS = "TRACEGRAPH_LOGS"            # a logging level name, e.g. DEBUG
SIM_ORDER = "TRACEGRAPH_SIM_ORDER"  # "random" or an integer seed: sim runs a random valid order


def backend_override() -> str | None:
    value = os.environ.get(BACKEND, "").strip().lower()
    return value or None


def sim_order_seed() -> int | None:
    value = os.environ.get(SIM_ORDER, "").strip().lower()
    if not value:
        return None
    if value == "random":
        return int.from_bytes(os.urandom(4), "little")
    return int(value)


def configure_logging() -> None:
    level = os.environ.get(LOGS, "").strip().upper()
    if level:
        logger = logging.getLogger("tracegraph")
        logger.setLevel(level)
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            logger.addHandler(handler)
