"""On-demand prices of SageMaker training instances: the Price List Query API, a disk cache, overrides.

:mod:`~.price_list` is pure (the filters, the answer's shape, what a price is), :mod:`~.lookup`
calls the ``pricing`` client it is given, :mod:`~.cache` keeps answers on disk per region.
"""
