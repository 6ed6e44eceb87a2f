"""The client settings of the llm-rubric judges a live run calls: the named endpoints its cases use, keys from the
environment."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Case
from ..sources.endpoints import Endpoint, api_key, case_endpoints
from .http import ClientSettings


def judge_settings(cases: Sequence[Case], endpoints: Mapping[str, Endpoint], environ: Mapping[str, str],
                   timeout_s: float, shown: str) -> dict[str, ClientSettings]:
    """One ClientSettings per endpoint the cases' rubrics name; a key variable that is not set is bad usage, found
    before any call."""
    used = sorted({name for case in cases for name in case_endpoints(case)})
    return {name: ClientSettings(base_url=endpoints[name].base_url, model=endpoints[name].model,
                                 temperature=endpoints[name].temperature, provider=endpoints[name].provider,
                                 api_key=api_key(endpoints[name], environ, shown), case_timeout_s=timeout_s)
            for name in used}
