"""bench_tasks.core.saturation: the harness's view of itself, on literal samples with known answers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench_tasks.core.saturation import ProcessWatch, ThreadTimes, describe, read_threads, summarize, verdict

S = 1_000_000_000


class Script:
    """A scripted process: each call of `read`/`cpu`/`clock` returns the next value given."""

    def __init__(self, at: list[int], threads: list[dict[str, ThreadTimes]], cpu: list[int]):
        self.at, self.threads, self.cpu_ns = iter(at), iter(threads), iter(cpu)

    def watch(self) -> ProcessWatch:
        return ProcessWatch(clock=lambda: next(self.at), read=lambda: next(self.threads), cpu=lambda: next(self.cpu_ns))


def scripted(backlogs: list[int | None], handled: list[int], main_run_ns: list[int]) -> ProcessWatch:
    """Samples one second apart; the main thread ran `main_run_ns` (cumulative), a native thread idled."""
    n = len(backlogs)
    threads = [
        {"main": ThreadTimes(run, run // 10, k * 100), "rdk:main": ThreadTimes(0, 0, 0)}
        for k, run in enumerate(main_run_ns)
    ]
    script = Script([k * S for k in range(n)], threads, [run + run // 2 for run in main_run_ns])
    watch = script.watch()
    for backlog, count in zip(backlogs, handled, strict=True):
        watch.sample(backlog, count)
    return watch


def test_summary_covers_the_measure_window_only() -> None:
    # 6 samples at 0..5 s; the window 1..4 s holds samples 1..4 (3 s of wall time).
    watch = scripted(
        [0, 0, 10, 20, 30, 9999], [0, 100, 1100, 2100, 3100, 9999], [0, S // 10, S // 5, 3 * S // 10, 2 * S // 5, S]
    )
    s = summarize(watch, (1 * S, 4 * S), limit_ms=100)
    assert s["samples"] == 4 and s["seconds"] == 3.0
    assert s["rate_per_s"] == 1000.0  # (3100 - 100) messages in 3 s
    assert s["busy"] == 0.1  # the main thread ran 0.3 s of 3 s
    assert s["cpu_cores"] == 0.15  # the process: 1.5 × the main thread
    assert s["threads"]["main"] == {
        "cpu": 0.1,
        "waiting_for_cpu": 0.01,
        "wakeups_per_s": 100.0,
        "mean_cpu_wait_us": 100.0,
    }
    # backlog samples 0, 10, 20, 30 at 1000/s: 0..30 ms; the limit is 100 ms
    assert s["backlog"] == {
        "messages_p50": 15,
        "messages_max": 30,
        "ms_p50": 15.0,
        "ms_max": 30.0,
        "share_over_limit": 0.0,
    }


def test_a_window_with_fewer_than_two_samples_says_nothing() -> None:
    watch = scripted([0, 0], [0, 10], [0, 1])
    assert summarize(watch, (S // 2, 3 * S), limit_ms=100) == {"samples": 1, "window_s": 2.5}


def test_a_gated_worker_that_could_not_sample_itself_saturated() -> None:
    """A consumer so starved that its own watcher ran once in a 4 s measure phase kept up with nothing."""
    reasons = verdict({"consumer c0": {"samples": 1, "window_s": 4.0}}, 5.0, ["consumer c0"])
    assert reasons == [
        "harness saturated: consumer c0 sampled itself 1 time(s) in the 4 s measure phase (about 16 expected): "
        "it could not even watch itself, let alone keep up"
    ]
    assert verdict({"consumer c0": {"samples": 1, "window_s": 0.2}}, 5.0, ["consumer c0"]) == []  # too short
    assert verdict({"laggard l0": {"samples": 0, "window_s": 4.0}}, 5.0, ["consumer c0"]) == []  # not gated


def test_unknown_backlog_is_left_out() -> None:
    watch = scripted([None, None, None], [0, 10, 20], [0, 1, 2])
    assert summarize(watch, (0, 2 * S), limit_ms=100)["backlog"] is None


def worker(busy: float = 0.2, threads: dict | None = None, backlog: dict | None = None) -> dict:
    return {
        "role": "consumer",
        "samples": 10,
        "seconds": 2.5,
        "rate_per_s": 10_000.0,
        "busy": busy,
        "waiting_for_cpu": 0.01,
        "cpu_cores": busy,
        "threads": threads
        or {"main": {"cpu": busy, "waiting_for_cpu": 0.01, "wakeups_per_s": 500.0, "mean_cpu_wait_us": 20.0}},
        "backlog": backlog,
    }


def test_a_healthy_harness_passes() -> None:
    healthy = worker(
        backlog={"messages_p50": 3, "messages_max": 900, "ms_p50": 0.3, "ms_max": 90.0, "share_over_limit": 0.0}
    )
    assert verdict({"consumer c0": healthy, "producer p0": worker(0.5)}, 100, ["consumer c0", "producer p0"]) == []


def test_a_busy_process_saturates() -> None:
    (reason,) = verdict({"producer p0": worker(0.99)}, 100, ["producer p0"])
    assert reason.startswith("harness saturated: producer p0 ran Python 99% of the measure phase")


def test_a_persistent_backlog_saturates_and_names_its_size() -> None:
    backlog = {"messages_p50": 1500, "messages_max": 4000, "ms_p50": 150.0, "ms_max": 400.0, "share_over_limit": 0.8}
    (reason,) = verdict({"consumer c0": worker(backlog=backlog)}, 100, ["consumer c0"])
    assert reason.startswith("harness saturated: consumer c0 backlog 1,500 messages at the median (≈ 150.0 ms")
    assert "max_schedule_lag_ms=100 in 80% of the measure phase" in reason


def test_a_burst_that_drained_is_not_saturation() -> None:
    burst = {"messages_p50": 0, "messages_max": 40_000, "ms_p50": 0.0, "ms_max": 4000.0, "share_over_limit": 0.2}
    assert verdict({"consumer c0": worker(backlog=burst)}, 100, ["consumer c0"]) == []


def test_a_starved_thread_saturates_but_many_short_waits_do_not() -> None:
    starved = {"cpu": 0.02, "waiting_for_cpu": 0.6, "wakeups_per_s": 30.0, "mean_cpu_wait_us": 20_000.0}
    crowded = {"cpu": 0.3, "waiting_for_cpu": 0.3, "wakeups_per_s": 3000.0, "mean_cpu_wait_us": 100.0}
    kafka = {"message_threads": ["py-kafka-", "rdk:broker"]}
    workers = {
        "consumer c0": worker(threads={"main": crowded, "py-kafka-recv": starved}) | kafka,
        "producer p0": worker(threads={"main": crowded}) | kafka,
    }
    (reason,) = verdict(workers, 100, ["consumer c0", "producer p0"])
    assert reason.startswith("harness saturated: consumer c0 thread py-kafka-recv was starved of CPU")
    assert "20,000 µs per wake-up" in reason


def test_ungated_workers_are_recorded_not_judged() -> None:
    assert verdict({"laggard l0": worker(0.99)}, 100, ["consumer c0"]) == []


def test_read_threads_names_main_and_adds_namesakes(tmp_path: Path) -> None:
    def task(tid: int, name: str, run: int, wait: int, slices: int) -> None:
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "schedstat").write_text(f"{run} {wait} {slices}\n")
        (tmp_path / str(tid) / "comm").write_text(f"{name}\n")

    task(os.getpid(), "sixnines produc", 10, 1, 2)
    task(1_000_001, "rdk:broker1", 5, 5, 1)
    task(1_000_002, "rdk:broker1", 7, 1, 3)
    (tmp_path / "1000003").mkdir()  # a thread that ended before it could be read
    assert read_threads(tmp_path) == {"main": ThreadTimes(10, 1, 2), "rdk:broker1": ThreadTimes(12, 6, 4)}


def test_the_real_process_reads() -> None:
    threads = read_threads()
    assert "main" in threads and threads["main"].run_ns > 0


@pytest.mark.parametrize("share", [0.5, 0.51])
def test_the_backlog_rule_needs_more_than_half(share: float) -> None:
    backlog = {"messages_p50": 2000, "messages_max": 2000, "ms_p50": 200.0, "ms_max": 200.0, "share_over_limit": share}
    assert bool(verdict({"consumer c0": worker(backlog=backlog)}, 100, ["consumer c0"])) == (share > 0.5)


def test_only_the_drivers_message_threads_are_judged_for_starvation() -> None:
    starved = {"cpu": 0.0, "waiting_for_cpu": 0.11, "wakeups_per_s": 16.0, "mean_cpu_wait_us": 6800.0}
    housekeeping = {"rdk:main": starved, "sixnines produc": starved, "jemalloc_bg_thd": starved}
    kafka = {"message_threads": ["py-kafka-", "rdk:broker"]}
    producer = worker(threads={"main": starved, **housekeeping}) | {"role": "producer"} | kafka
    relay = worker(threads=housekeeping) | {"role": "relay"} | kafka
    reporting = worker(threads={"main": starved}) | {"role": "consumer"} | kafka  # a Kafka loop only reports
    workers = {"producer p0": producer, "relay r0": relay, "consumer c1": reporting}
    assert verdict(workers, 100, list(workers)) == []
    fetching = worker(threads={"rdk:broker1": starved}) | {"role": "consumer"} | kafka
    (reason,) = verdict({"consumer c0": fetching}, 100, ["consumer c0"])
    assert "thread rdk:broker1 was starved" in reason
    nats = worker(threads={"main": starved}) | {"role": "consumer", "message_threads": ["main"]}
    (reason,) = verdict({"consumer c0": nats}, 100, ["consumer c0"])
    assert "thread main was starved" in reason


def test_a_receive_wait_over_the_limit_saturates_like_send_lag() -> None:
    slow = worker() | {"receive_wait_us": {"50": 40.0, "99": 900.0, "99.9": 150_000.0, "max": 210_000.0, "count": 9}}
    (reason,) = verdict({"consumer c0": slow}, 100, ["consumer c0"])
    assert reason == (
        "harness saturated: consumer c0 held messages 150.00 ms at p99.9 (max 210.00 ms) between their arrival "
        "and their hand-over, over max_schedule_lag_ms=100"
    )
    quick = worker() | {"receive_wait_us": {"50": 40.0, "99": 90.0, "99.9": 900.0, "max": 2000.0, "count": 9}}
    assert verdict({"consumer c0": quick}, 100, ["consumer c0"]) == []


def test_describe_gives_one_line_per_worker_that_reported() -> None:
    consumer = worker(
        backlog={"messages_p50": 2, "messages_max": 90, "ms_p50": 0.2, "ms_max": 9.0, "share_over_limit": 0.0}
    )
    consumer["receive_wait_us"] = {"50": 30.0, "99": 80.0, "99.9": 1500.0, "max": 3000.0, "count": 5}
    lines = describe({"consumer c0": consumer, "producer p0": worker(0.5), "laggard l0": {"samples": 0}})
    assert lines == [
        "consumer c0: 0.20 cores, Python busy 20%, waiting for a CPU 1%, backlog median 2 max 90, "
        "held after arrival p99.9 1.50 ms",
        "producer p0: 0.50 cores, Python busy 50%, waiting for a CPU 1%",
    ]


def test_messages_a_full_queue_dropped_fail_the_cell_even_without_samples() -> None:
    """A slow consumer's drops are the harness's loss, not the system's: counted and failed, never hidden."""
    dropped = worker() | {"dropped": 1234, "client_errors": {"count": 0, "kinds": {}, "last": None}}
    (reason,) = verdict({"relay r0": dropped}, 100, ["relay r0"])
    assert reason.startswith("harness dropped 1,234 messages: relay r0 received them but a queue inside the harness")
    assert verdict({"relay r0": {"samples": 0, "dropped": 5}}, 100, ["relay r0"])  # a cell too short to sample
    errors = {"count": 3, "kinds": {"_TRANSPORT": 3}, "last": "_TRANSPORT: broker down"}
    assert verdict({"consumer c0": worker() | {"dropped": 0, "client_errors": errors}}, 100, ["consumer c0"]) == []
    (line,) = describe({"consumer c0": worker() | {"dropped": 7, "client_errors": errors}})
    assert line.endswith("dropped 7 from a full queue, 3 client error(s), last _TRANSPORT: broker down")


def test_a_busy_receiver_that_fell_behind_is_the_harness_not_the_system() -> None:
    """Figures from a NATS core capacity search: one consumer 95 % busy took 373,357 of 418,000 msg/s offered, its
    backlog out of its sight in the server; a broker that falls behind leaves its consumers idle instead."""
    from bench_tasks.core.saturation import fell_behind

    busy, idle = {"consumer c0": worker(0.95)}, {"consumer c0": worker(0.40)}
    (reason,) = fell_behind(busy, ["consumer c0"], 373_357, 418_000)
    assert reason.startswith("harness saturated: consumer c0 was runnable 96% of the measure phase (ran Python 95%")
    assert "while 373,357 of 418,000 msg/s offered arrived" in reason
    starved = {"consumer c0": worker(0.88) | {"waiting_for_cpu": 0.12}}  # CI: ran 88 %, waited 12 %
    assert fell_behind(starved, ["consumer c0"], 353_497, 1_000_000)
    assert fell_behind(idle, ["consumer c0"], 373_357, 418_000) == []  # the system fell behind: its number
    assert fell_behind(busy, ["consumer c0"], 417_000, 418_000) == []  # it kept up, busy as it was
