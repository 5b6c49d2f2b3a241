"""The Ryu API from wherever it is installed: os-ken (the maintained fork, Debian's
python3-os-ken) first, the original ``ryu`` package otherwise. Nothing else imports either."""

from __future__ import annotations

try:
    from os_ken.base.app_manager import OSKenApp as RyuApp
    from os_ken.controller import controller as CONTROLLER_MODULE
    from os_ken.controller import ofp_event
    from os_ken.controller.handler import (
        CONFIG_DISPATCHER,
        DEAD_DISPATCHER,
        MAIN_DISPATCHER,
        set_ev_cls,
    )
    from os_ken.lib import hub
    from os_ken.ofproto import ofproto_v1_3

    FRAMEWORK = "os-ken"
    MANAGER_MODULE = "os_ken.cmd.manager"
except ImportError:  # pragma: no cover - where only Ryu is installed
    from ryu.base.app_manager import RyuApp  # type: ignore[no-redef]
    from ryu.controller import controller as CONTROLLER_MODULE  # type: ignore[no-redef]
    from ryu.controller import ofp_event  # type: ignore[no-redef]
    from ryu.controller.handler import (  # type: ignore[no-redef]
        CONFIG_DISPATCHER,
        DEAD_DISPATCHER,
        MAIN_DISPATCHER,
        set_ev_cls,
    )
    from ryu.lib import hub  # type: ignore[no-redef]
    from ryu.ofproto import ofproto_v1_3  # type: ignore[no-redef]

    FRAMEWORK = "ryu"
    MANAGER_MODULE = "ryu.cmd.manager"

__all__ = [
    "CONFIG_DISPATCHER", "CONTROLLER_MODULE", "DEAD_DISPATCHER", "FRAMEWORK", "MAIN_DISPATCHER",
    "MANAGER_MODULE", "RyuApp", "hub", "ofp_event", "ofproto_v1_3", "set_ev_cls",
]
