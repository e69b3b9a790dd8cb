"""Shared data for the qbeast model tests: the real §7.1 revision and §7.2 add tags."""

REVISION_JSON = (
    '{"revisionID":1,"timestamp":1726222122375,"tableID":"/abs/path/table","desiredCubeSize":500000,'
    '"columnTransformers":[{"className":"io.qbeast.core.transform.LinearTransformer","columnName":"id","dataType":"IntegerDataType"},'
    '{"className":"io.qbeast.core.transform.HashTransformer","columnName":"name","dataType":"StringDataType"}],'
    '"transformations":[{"className":"io.qbeast.core.transform.LinearTransformation","minNumber":1,"maxNumber":4000000,"nullValue":2836883,"orderedDataType":"IntegerDataType"},'
    '{"className":"io.qbeast.core.transform.HashTransformation","nullValue":-1628776639}]}'
)
BLOCKS_JSON = (
    '[{"cubeId":"gw","minWeight":-800322436,"maxWeight":2147483647,"elementCount":169364},'
    '{"cubeId":"g","minWeight":-1879047437,"maxWeight":-800348665,"elementCount":250669}]'
)
