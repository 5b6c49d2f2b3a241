"""User-facing errors: one clear sentence, never a traceback."""


class FabricLabError(Exception):
    """An error whose message is shown to the user as is (one sentence naming the fix)."""


class SpecError(FabricLabError):
    """A spec that cannot work; the message names the field path and the reason."""


class PrivilegeError(FabricLabError):
    """Something needs root or a missing system component."""
