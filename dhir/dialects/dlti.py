"""xDSL's dlti dialect, which dhir takes as it is (no shadow): the rest of dhir
reaches it through this module, as it reaches every dialect through dhir.dialects."""

# isort: off
from xdsl.dialects.dlti import (
    DLTIEntryMap as DLTIEntryMap,
    DataLayoutEntryAttr as DataLayoutEntryAttr,
    MapAttr as MapAttr,
    TargetDeviceSpecAttr as TargetDeviceSpecAttr,
    TargetSystemSpecAttr as TargetSystemSpecAttr,
)
# isort: on
