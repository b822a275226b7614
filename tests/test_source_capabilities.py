"""The source interface: each source offers the capabilities it lists, with every member of each,
and the pipeline's question (capability) answers by the list. Pure: no process is started."""

import pytest

from phasescope.sources.kernel_session import KernelSession
from phasescope.sources.protocol import Agent, Bursts, Locality, Session, Wakes, capability
from phasescope.sources.sampled_session import SampledSession
from phasescope.sources.session import TraceSession

CAPABILITIES = (Bursts, Locality, Agent, Wakes)


def annotated(cls) -> set:
    """Names annotated in ``cls`` and its bases (not evaluated: some name types only a type checker loads)."""
    return {n for klass in cls.__mro__ for n in vars(klass).get("__annotations__", {})}


def members(protocol) -> set:
    names = annotated(protocol) | {n for n, v in vars(protocol).items()
                                                     if callable(v) or isinstance(v, property)}
    return {n for n in names if not n.startswith("_")}


def offered(cls, caps) -> None:
    for cap in caps:
        missing = {m for m in members(cap) if not hasattr(cls, m) and m not in annotated(cls)
                   and m not in cls.__init__.__code__.co_names}
        assert not missing, f"{cls.__name__} lists {cap.__name__} without {sorted(missing)}"


@pytest.mark.parametrize("cls,caps", [(TraceSession, TraceSession.capabilities),
                                      (KernelSession, KernelSession.capabilities),
                                      (SampledSession, (Bursts, Agent))])
def test_a_source_has_every_member_of_what_it_offers(cls, caps):
    offered(cls, caps)
    for name in members(Session) - {"capabilities"}:  # the core: every source
        assert hasattr(cls, name) or name in cls.__init__.__code__.co_names, (cls.__name__, name)


def test_the_kernel_session_offers_no_agent_capability():
    assert KernelSession.capabilities == (Wakes,)  # it sleeps until its rings have data, nothing else
    assert not hasattr(KernelSession, "burst") and not hasattr(KernelSession, "request_window")


class _Core:
    capabilities = (Locality,)


def test_capability_answers_by_the_list():
    src = _Core()
    assert capability(src, Locality) is src
    assert capability(src, Bursts) is None and capability(src, Agent) is None
