"""The fp64 referee: eager's and the candidate's errors against the model in fp64, on the same inputs."""
import torch

from workbench.harness.compare import flatten_outputs
from workbench.harness.referee import fp64_referee


class CancellingSum(torch.nn.Module):
    """An ill-conditioned reference: a row sum of large terms that cancel (fp32 loses the small part)."""

    def forward(self, x):
        return (x * 1e4).sum(dim=1) - (x * 1e4 - 1e-3).sum(dim=1)


def test_a_candidate_closer_to_fp64_than_eager_is_as_good():
    torch.manual_seed(0)
    x = torch.randn(7, 4099)
    model = CancellingSum()
    ref = flatten_outputs(model(x))
    exact = model.double()(x.double()).float()  # a candidate that summed in fp64: closer than eager
    model.float()
    got = [exact]
    r = fp64_referee(model, [x], got, ref, flatten_outputs)
    assert r["eager_fp64_err"] > 1e-3 and r["candidate_fp64_err"] < r["eager_fp64_err"] and r["as_good_as_eager"]


def test_a_wrong_candidate_is_not():
    torch.manual_seed(1)
    lin = torch.nn.Linear(33, 5)
    x = torch.randn(9, 33)
    ref = flatten_outputs(lin(x))
    r = fp64_referee(lin, [x], [ref[0] + 0.1], ref, flatten_outputs)
    assert r["eager_fp64_err"] < 1e-5 and r["candidate_fp64_err"] > 0.09 and not r["as_good_as_eager"]
    assert lin.weight.dtype == torch.float32  # the referee works on a copy


def test_integer_outputs_and_a_failing_fp64_model():
    class IntOnly(torch.nn.Module):
        def forward(self, x):
            return torch.bitwise_and(x, 3)

    x = torch.arange(10)
    r = fp64_referee(IntOnly(), [x], [x & 3], [x & 3], flatten_outputs)
    assert r == {"eager_fp64_err": 0.0, "candidate_fp64_err": 0.0, "as_good_as_eager": True}  # exact outputs
    mismatched = fp64_referee(CancellingSum(), [torch.randn(2, 3)], [torch.zeros(3, 3)], [torch.zeros(2)],
                              flatten_outputs)
    assert "error" in mismatched


def test_sampled_positions_are_refereed_on_the_same_positions():
    """The judge compares a large output at sampled positions: the fp64 result goes through the same selection."""
    torch.manual_seed(2)
    lin = torch.nn.Linear(16, 64)
    x = torch.randn(5, 16)
    pos = torch.tensor([3, 17, 200, 319])
    pick = lambda outs: [o.reshape(-1)[pos] for o in outs]  # noqa: E731 - the judge's sample
    full = flatten_outputs(lin(x))
    got = [v.clone() for v in pick(full)]
    got[0][1] += 0.5
    r = fp64_referee(lin, [x], got, pick(full), flatten_outputs, select=pick)
    assert r["candidate_fp64_err"] > 0.49 and r["eager_fp64_err"] < 1e-5 and not r["as_good_as_eager"]
    assert "error" in fp64_referee(lin, [x], got, pick(full), flatten_outputs)  # unselected: shapes differ
