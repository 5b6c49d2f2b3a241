"""Transports, one module each (``zerocopy``, ``rpc``), found by name through
:data:`testbed.core.registry.TRANSPORTS`; :mod:`.base` holds the interfaces they fill in and
what they share (tags, headers, errors). A new transport is one module plus one registration
(see docs/extending.md)."""

from workloads.transports.base import (
    CollectiveError,
    CollectiveTimeout,
    Endpoint,
    LinkSpec,
    PeerLink,
    PeerLostError,
    RendezvousError,
    Tag,
    Transport,
)

__all__ = [
    "CollectiveError",
    "CollectiveTimeout",
    "Endpoint",
    "LinkSpec",
    "PeerLink",
    "PeerLostError",
    "RendezvousError",
    "Tag",
    "Transport",
]
