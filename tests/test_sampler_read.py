"""A namespace's counters are stamped with when they were read, and a read held long enough
to blur that is done again (pure: a fake clock and file)."""

from __future__ import annotations

from testbed.emulator.sampler import SLOW_READ_S, timed_read


class Slow:
    """A read that takes the given seconds each time, on a clock it advances."""

    def __init__(self, durations_s: list[float]) -> None:
        self.now, self.durations_s, self.reads = 100.0, list(durations_s), 0

    def clock(self) -> float:
        return self.now

    def read(self, _path: str) -> dict[str, tuple[int, int]]:
        self.reads += 1
        self.now += self.durations_s.pop(0)
        return {"h0-eth0": (self.reads, self.reads)}


def test_a_quick_read_is_stamped_at_its_middle_and_not_repeated() -> None:
    f = Slow([0.0004])
    value, at = timed_read(f.read, "x", f.clock)
    assert (value, at, f.reads) == ({"h0-eth0": (1, 1)}, 100.0002, 1)


def test_a_held_read_is_done_again_and_the_quick_one_kept() -> None:
    f = Slow([0.2, 0.0004])
    value, at = timed_read(f.read, "x", f.clock)
    assert f.reads == 2 and value == {"h0-eth0": (2, 2)}
    assert abs(at - (100.2 + 0.0002)) < 1e-9  # not the held read's midpoint, 100.1


def test_when_every_try_is_held_the_quickest_is_kept() -> None:
    f = Slow([0.3, 0.05, 0.2])
    value, at = timed_read(f.read, "x", f.clock)
    assert f.reads == 3 and value == {"h0-eth0": (2, 2)} and abs(at - 100.325) < 1e-9
    assert SLOW_READ_S < 0.05


def test_a_file_that_is_gone_reads_as_nothing() -> None:
    def gone(_path: str) -> dict[str, tuple[int, int]]:
        raise FileNotFoundError("/proc/1234/net/dev")

    value, _at = timed_read(gone, "x", lambda: 5.0)
    assert value == {}
