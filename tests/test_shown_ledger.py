"""Exact mode's shown changes held to their own record (issue 28, stop 48), on constructed streams."""

from phasescope.engine.ledger import ShownLedger
from phasescope.engine.predict import PredictorConfig, ThreadPredictors

TURN = [0] * 5 + [1] * 3 + [2] * 8 + [3] * 2  # a fixed cycle of four phases


def adversary(n=3000):
    """A stream made against the shown prediction: a fixed cycle, except that whenever a change is
    shown the run goes on one interval more, so every change shown is a misprediction that
    last-phase does not make; the stream and what was shown after each interval."""
    tp = ThreadPredictors(PredictorConfig(shown="context"))
    stream, shown, k = [], [], 0
    while len(stream) < n:
        if shown and shown[-1] != stream[-1]:
            phase = stream[-1]
        else:
            phase, k = TURN[k % len(TURN)], k + 1
        stream.append(phase)
        tp.observe(phase)
        shown.append(tp.prediction)
    return stream, shown


def test_the_shown_prediction_never_loses_more_than_the_thread_s_budget_to_last_phase():
    # every change shown loses, by construction; the proposers keep proposing (the cycle goes on
    # between the losses): the thread's record stops them after THREAD losses, at every point of
    # the run (before it, the shown prediction made 977 mispredictions against last-phase's 578)
    stream, shown = adversary()
    extra = 0
    for i in range(1, len(stream)):
        extra += (shown[i - 1] != stream[i]) - (stream[i - 1] != stream[i])
        assert extra <= ShownLedger.THREAD
    assert sum(s != p for s, p in zip(shown, stream)) == ShownLedger.THREAD


def test_a_fixed_cycle_is_foretold_as_before():
    # the changes shown on a fixed cycle come true, so the records only rise: every change from
    # the fourth turn on is foretold, as the proposers' gates allow without the ledger
    stream = TURN * 20
    tp = ThreadPredictors(PredictorConfig(shown="context"))
    shown = []
    for phase in stream:
        tp.observe(phase)
        shown.append(tp.prediction)
    changes = [i for i in range(1, len(stream)) if stream[i] != stream[i - 1]]
    foretold = {i for i in changes if shown[i - 1] == stream[i]}
    assert set(changes[3 * 4:]) <= foretold
    assert all(shown[i] == stream[i] for i in range(len(stream) - 1) if stream[i + 1] == stream[i])  # no false change
    assert tp.ledger.thread == ShownLedger.THREAD + len(foretold)


def test_ledger_scores_only_the_changes_it_lets_through():
    g = ShownLedger()
    assert g.observe(0, 1)  # phase 0's first change: the prior speaks
    assert not g.observe(0, 0)  # the run went on (0 -> 0): no change proposed now
    assert (g.thread, g.record(0)) == (ShownLedger.THREAD - 1, ShownLedger.PHASE - 1)
    assert g.observe(0, 1)  # phase 0's record 1: still ahead
    assert g.observe(2, 3)  # 2 came, neither 0 nor 1: both records stay; 2's first change is shown
    assert (g.thread, g.record(0), g.record(2)) == (ShownLedger.THREAD - 1, ShownLedger.PHASE - 1, ShownLedger.PHASE)


def test_ledger_stops_a_phase_then_the_thread():
    g = ShownLedger()
    for _ in range(ShownLedger.PHASE):  # phase 0's shown changes lose twice: phase 0 stops
        assert g.observe(0, 1)
    assert not g.observe(0, 1)  # scored (the run went on); not shown
    assert g.record(0) == 0 and g.thread == ShownLedger.THREAD - ShownLedger.PHASE
    assert not g.observe(0, 1)  # an unshown change is not scored: phase 0 stays stopped
    assert g.record(0) == 0
    assert g.observe(5, 6)  # phase 5 speaks on the thread's remaining budget, and loses it
    assert not g.observe(5, 6)
    assert g.thread == 0 and g.record(5) == ShownLedger.PHASE - 1
    assert not g.observe(7, 8)  # the thread's budget is spent: no phase speaks again


def test_ledger_phase_record_saturates():
    g = ShownLedger()
    for _ in range(20):  # 0 -> 1 shown and right every time
        assert g.observe(0, 1)
        assert not g.observe(1, 1)
    assert g.record(0) == ShownLedger.MAX and g.thread == ShownLedger.THREAD + 20
