"""The kubeconfigs' YAML read without PyYAML: where it gives a value, PyYAML's safe loader
gives the same; kubeconfigs as kubectl, kind and this repository write them are read (not
declined); anything else is declined, never misread."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tfmw_client.plain_yaml import DECLINED, load

KUBECTL = """apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=
    server: https://127.0.0.1:6443
  name: kind-kind
- cluster:
    insecure-skip-tls-verify: true
    server: https://api.lab.example:443
    proxy-url: http://proxy.lab:3128
    tls-server-name: api.lab
  name: arn:aws:eks:us-west-2:123456789012:cluster/prod
contexts:
- context:
    cluster: kind-kind
    namespace: team-a
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ==
- name: gke_project_zone_name
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --token-only
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin for use with kubectl
      provideClusterInfo: true
"""

# hack/cluster.sh's, flow mappings included.
LOCAL = """apiVersion: v1
kind: Config
clusters:
- name: tfmw-local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: /work/.cluster/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: /work/.cluster/pki/admin.crt
    client-key: /work/.cluster/pki/admin.key
contexts:
- name: tfmw-local
  context: {cluster: tfmw-local, user: admin}
current-context: tfmw-local
"""


@pytest.mark.parametrize("text", [KUBECTL, LOCAL, "# a comment\n" + LOCAL.replace("\n", "\n\n")])
def test_kubeconfigs_as_tools_write_them_are_read_as_pyyaml_reads_them(text: str) -> None:
    assert load(text) is not DECLINED
    assert load(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n",  # numbers
        "a: 2026-12-05\n",  # dates
        "a: |\n  text\n",  # block scalars
        "a: &x b\nc: *x\n",  # anchors and aliases
        "a: !!str b\n",  # tags
        'a: "\\u00e9"\n',  # escapes
        "a: b # comment\n",
        "a: b\n  c\n",  # a multi-line plain scalar
        "a:\tb\n",
        "a: é\n",
        "---\na: b\n",
        "a: b\r\n",
        "<<: {a: b}\n",
        "a: [b,c]\n",
        "a: {b: http://c}\n",
        "",
        "just a scalar\n",
        "  a: b\n",
        "a: [b?c]\n",  # PyYAML's parser refuses "?" there (libyaml's reads it)
        "a: {b?c: d}\n",
        "k" * 1025 + ": v\n",  # PyYAML refuses implicit keys over 1024 characters
        '"' + "k" * 1025 + '": v\n',
        "a: {" + "k" * 1025 + ": v}\n",
        "a: [" + ", ".join(["x"] * 30000) + "]\n",  # lines over MAX_LINE
        "a:\n"
        + "".join("  " * i + "b:\n" for i in range(1, 600))
        + "  " * 600
        + "c: d\n",  # deeper than the stack
        "a: " + "[" * 2000 + "]" * 2000 + "\n",
    ],
)
def test_what_is_not_read_here_is_declined(text: str) -> None:
    assert load(text) is DECLINED


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            "a: yes\nb: Off\nc: ~\nd:\ne: null\nf: none\n",
            {"a": True, "b": False, "c": None, "d": None, "e": None, "f": "none"},
        ),
        ("a:\n- b\n- - c\n  - d\n-\n", None),  # a sequence at the key's indent, nested, and an empty item
        ("a: 'it''s'\nb: \"q\"\n'c d': e f\n", {"a": "it's", "b": "q", "c d": "e f"}),
        ("a: {b: [c, 'd'], e: {}}\nf: []\n", {"a": {"b": ["c", "d"], "e": {}}, "f": []}),
        ("a: b\na: c\n", {"a": "c"}),  # the last of a key, as PyYAML
        ("a:b: c\n", {"a:b": "c"}),
    ],
)
def test_the_yaml_read_here_means_what_pyyaml_says(text: str, value: Any) -> None:
    expected = yaml.safe_load(text)
    if value is not None:
        assert expected == value
    assert load(text) == expected


# Documents of the shapes kubeconfigs have, with strings from an alphabet that reaches the
# corners: indicators, quotes, colons, spaces, YAML 1.1 words.
WORDS = st.sampled_from(
    ["yes", "No", "on", "OFF", "null", "~", "true", "none", "y", "n", "1", "0x1f", "1:20", ".5"]
)
TEXT = st.text(alphabet=st.sampled_from(list("abcXYZ09-_./:@#'\"!&*?|>%, []{}=<~+")), max_size=12)
SCALARS = st.one_of(TEXT, WORDS, st.booleans(), st.none(), st.integers(-5, 5))
KEYS = st.one_of(st.text(alphabet=st.sampled_from(list("abcxyz-_.:/ ")), min_size=1, max_size=10), WORDS)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    document=st.dictionaries(KEYS, DOCUMENTS, min_size=1, max_size=5),
    flow=st.sampled_from([False, None, True]),
    indent=st.sampled_from([2, 4]),
)
def test_pyyamls_own_output_in_every_style_is_read_the_same_or_declined(
    document: dict[str, Any], flow: bool | None, indent: int
) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow, indent=indent, width=1000)
    read = load(text)
    assert read is DECLINED or read == yaml.safe_load(text), text


# Lines built of the pieces of YAML's block syntax, at random indents: mostly valid YAML,
# often not, the corners (indicators, quotes, YAML 1.1 words) among the words.
TOKEN = st.sampled_from(
    [
        "a",
        "b c",
        "yes",
        "~",
        "null",
        "'q'",
        "'it''s'",
        '"d"',
        "{}",
        "[]",
        "{a: b}",
        "[a, b]",
        "x:y",
        "-o",
        "#c",
        "a #c",
        "&x",
        "*x",
        "!t",
        "|",
        "1",
        ".5",
        "'",
        "{a",
        "a,b",
        "é",
    ]
)
LINE = st.tuples(
    st.sampled_from([0, 0, 1, 2, 2, 4]),
    st.sampled_from(["", "", "- ", "- - ", "-"]),
    st.one_of(st.just(""), st.sampled_from(["k", "key", "'k'", "a b", "k:"]).map(lambda key: key + ":")),
    st.sampled_from(["", " ", "  "]),
    st.one_of(st.just(""), TOKEN),
).map(lambda parts: " " * parts[0] + "".join(parts[1:]))
LINES = st.lists(LINE, min_size=1, max_size=8)


@settings(max_examples=2000)
@given(lines=LINES)
def test_random_text_is_read_as_pyyaml_reads_it_or_declined(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    read = load(text)
    if read is DECLINED:
        return
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise AssertionError(f"read {read!r} where PyYAML fails: {error}\n{text}") from None
    assert read == expected, text
