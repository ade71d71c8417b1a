"""Re-export of `workbench.tunables` (moved below both the lowering and the search, so that
`workbench.lowering.tune` does not import the search): the offline operator imports it from here."""
from workbench.tunables import (  # noqa: F401
    TunablesError,
    TunableSpace,
    apply_config,
    config_key,
    parse_tunables,
)

__all__ = ["TunableSpace", "TunablesError", "apply_config", "config_key", "parse_tunables"]
