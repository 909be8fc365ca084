"""How to sample is one frozen value (``hybrid_attention.Sampling``), built and validated once and passed explicitly
from the model to the bridge: its validation, its equivalence with the exact path, the per-layer chain keys, and the
absence of hidden state on the route (no attribute mutation, no proxy class)."""

from __future__ import annotations

import ast
import dataclasses

import pytest
import torch

import hybrid_attention
from hybrid_attention import PersistentChains, Sampling, Transformer, TransformerConfig
from hybrid_attention.attention import BoltzmannAttention
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits.proposal import ProposalParams
from tests.conftest import REPO

#: the training route, from the loop down to the bridge
ROUTE = (
    "hybrid_attention/apps/train/loop.py",
    "hybrid_attention/model.py",
    "hybrid_attention/attention.py",
    "hybrid_attention/bridge.py",
    "hybrid_attention/sampling.py",
)


def _model(n_layer=1, attention="hj", T=5):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=7, block_size=T, n_layer=n_layer, n_embd=8, attention=attention))


def test_the_value_resolves_its_readout_and_is_frozen():
    assert Sampling(get_sampler("statevector")).readout == "exact"
    assert Sampling(get_sampler("meanfield")).readout == "exact"
    assert Sampling(get_sampler("gibbs")).readout == "shots"
    assert Sampling(get_sampler("statevector"), estimator="conditional").readout == "shots"
    s = Sampling(get_sampler("gibbs"), num_reads=8, seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.num_reads = 16
    assert s.layer(2).chain_key == "layer2" and s.layer(2).seed == 3 and s.chain_key is None
    assert s.with_seed(5).seed == 5 and s.seed == 3
    assert "gibbs" in repr(s) and "num_reads=8" in repr(s)
    assert hybrid_attention.Sampling is Sampling and "Sampling" in hybrid_attention.__all__


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        ({"sampler": "gibbs"}, TypeError, "Sampler declaring SamplerCapabilities"),
        ({"sampler": type(get_sampler("gibbs"))}, TypeError, r"a Sampler instance .* got the class GibbsSampler"),
        ({"num_reads": 0}, ValueError, "num_reads must be an integer >= 1"),
        ({"num_reads": 2.5}, TypeError, "num_reads must be an integer"),
        ({"seed": 1.5}, TypeError, "seed must be"),
        ({"readout": "all"}, ValueError, "unknown readout 'all'"),
        ({"estimator": "mean"}, ValueError, "unknown estimator 'mean'"),
        ({"readout": "exact"}, ValueError, "gives reads only"),
        ({"chains": 4}, TypeError, "chains must be a PersistentChains"),
        ({"sampler": get_sampler("anneal"), "chains": PersistentChains(4)}, ValueError, "Markov-chain sampler"),
        ({"chains": PersistentChains(4), "num_reads": 2}, ValueError, "below the 4 persistent chains"),
    ],
)
def test_bad_values_are_refused_when_the_value_is_built(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        Sampling(**{"sampler": get_sampler("gibbs"), **kwargs})


def test_the_model_with_an_exact_value_equals_the_exact_path():
    model = _model(n_layer=2)
    x = torch.randint(0, 7, (3, 5))
    ref, ref_loss = model(x, x)
    got, loss = model(x, x, sampling=Sampling(get_sampler("exact")))
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-6)
    # the exact sampler's reads over every state with their weights (readout shots, num_reads None) are exact too
    got, _ = model(x, x, sampling=Sampling(get_sampler("exact"), readout="shots"))
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-5)
    with pytest.raises(TypeError, match="sampling must be a Sampling"):
        model(x, sampling=get_sampler("exact"))


def test_each_layer_gets_its_own_chains_and_nothing_is_left_on_the_modules():
    model = _model(n_layer=2)
    qs = get_sampler("qemcmc", burn_in=1, params=ProposalParams(steps=2))
    chains = PersistentChains(num_chains=2, seed=0)
    sampling = Sampling(qs, num_reads=2, chains=chains, estimator="conditional", seed=0)
    x = torch.randint(0, 7, (3, 5))
    _, loss = model(x, x, sampling=sampling)
    loss.backward()
    assert chains.keys() == ["layer0", "layer1"] and chains.state("layer1").shape == (3, 1, 5, 2, 5)
    for module in model.modules():  # the sampler went down as an argument: no module holds it
        for value in vars(module).values():
            assert value is not qs and value is not sampling and value is not chains
    assert not any(hasattr(layer, name) for layer in model.attention_layers for name in ("sampler", "num_reads"))


def _proxies_and_mutations(path):
    """Classes defining ``__getattr__`` and assignments to ``<not self>.sampler/num_reads/seed/chains`` in a file."""
    tree = ast.parse((REPO / path).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
            isinstance(f, ast.FunctionDef) and f.name == "__getattr__" for f in node.body
        ):
            found.append(f"{path}: class {node.name} defines __getattr__")
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr in ("sampler", "num_reads", "seed", "chains")
                    and not (isinstance(t.value, ast.Name) and t.value.id == "self")
                ):
                    found.append(f"{path}:{node.lineno}: sets .{t.attr} on another object")
    return found


def test_the_training_route_has_no_proxy_class_and_no_attribute_mutation():
    found = [f for path in ROUTE for f in _proxies_and_mutations(path)]
    assert not found, found


def test_the_route_check_can_fail(tmp_path, monkeypatch):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "class P:\n    def __getattr__(self, k):\n        return 1\n\ndef f(layer, s):\n    layer.sampler = s\n"
    )
    monkeypatch.setattr("tests.core.test_sampling.REPO", tmp_path)
    assert len(_proxies_and_mutations("bad.py")) == 2


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"n_head": 0}, "n_head must be an integer >= 1"),
        ({"block_size": 0}, "block_size must be an integer >= 1"),
        ({"n_embd": -4}, "n_embd must be an integer >= 1"),
        ({"n_head": 3}, "divisible"),
    ],
)
def test_attention_layer_sizes_are_checked(kwargs, words):
    with pytest.raises(ValueError, match=words):
        BoltzmannAttention(**{"n_embd": 8, "n_head": 2, "block_size": 4, **kwargs})


def test_plain_spin_averages_of_reads_warn():
    """Issue: attention marginals from plain spin averages of reads are never met without a warning."""
    import warnings

    from hybrid_attention import ReadNoiseWarning
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.bridge import attention_marginals

    with pytest.warns(ReadNoiseWarning, match="plain spin averages of 8 reads"):
        Sampling(get_sampler("gibbs"), 8)
    with pytest.warns(ReadNoiseWarning, match="estimator='conditional'"):
        attention_marginals(torch.randn(1, 1, 4, 4), torch.zeros(1, 4, 4), torch.ones(1), sampling=Sampling(get_sampler("gibbs"), num_reads=8, seed=0))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReadNoiseWarning)
        Sampling(get_sampler("gibbs"), 8, estimator="conditional")
        Sampling(get_sampler("statevector"))  # exact readout: no reads
        Sampling(get_sampler("exact"), 8, readout="shots", estimator="conditional")
