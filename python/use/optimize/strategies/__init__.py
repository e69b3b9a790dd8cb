"""File-selection strategies: pure functions of a snapshot and a config, registered by name.

Importing this package registers the built-in strategies (see `registry`). A new strategy is a class
with `select(snapshot, config) -> Plan | None` decorated with `@registry.register("Name")`; the planner
and the config find it by name without any other change.
"""

from use.optimize.strategies import registry
from use.optimize.strategies.binpacking import BinPacking, SmallFiles
from use.optimize.strategies.leveled import CubeDefragmentation, LeveledCompactionSelection
from use.optimize.strategies.overlap import ClusterKeyOverlap
from use.optimize.strategies.registry import Strategy, get, names, register
from use.optimize.strategies.sampling import SamplingOverheadReduction
from use.optimize.strategies.superseded import SupersededRevisionsSelection
from use.optimize.strategies.unindexed import UnindexedFilesSelection
from use.optimize.strategies.zorder import Hilbert, ZOrder

__all__ = [
    "BinPacking",
    "ClusterKeyOverlap",
    "CubeDefragmentation",
    "Hilbert",
    "LeveledCompactionSelection",
    "SamplingOverheadReduction",
    "SmallFiles",
    "SupersededRevisionsSelection",
    "Strategy",
    "UnindexedFilesSelection",
    "ZOrder",
    "get",
    "names",
    "register",
    "registry",
]
