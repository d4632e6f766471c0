"""Object stores: the :class:`ObjectStore` contract and its implementations."""

from objectstore.api import ObjectMeta, ObjectStore

__all__ = ["ObjectMeta", "ObjectStore"]
