"""core.redaction: each credential form is recognised, marked by kind, and redaction is idempotent."""

from __future__ import annotations

import pytest

from loopstate.core.redaction import contains_secret, redact

CASES = [
    ("openai_key", "key sk-proj-Q7vX2mN9pL4kR8tY1wZ3cB6dF0gH5jS here", "sk-proj-Q7vX2"),
    ("openai_key", "sk-Q7vX2mN9pL4kR8tY1wZ3cB6dF0gH5jS", "Q7vX2mN9"),
    ("anthropic_key", "ANTHROPIC sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "sk-ant-api03"),
    ("github_token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abc"),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11"),
    ("gitlab_token", "glpat-abcdefghij0123456789", "glpat-"),
    ("slack_token", "xoxb-1234567890-abcdefghij", "xoxb-"),
    ("aws_access_key", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("google_api_key", "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "AIzaSyA"),
    ("stripe_key", "sk_live_abcdefghijklmnop1234", "sk_live_"),
    ("huggingface_token", "hf_abcdefghijklmnopqrstuvwxyz0123456", "hf_abcdef"),
    ("npm_token", "npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdef"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJhbGci"),
    ("authorization", "Authorization: Bearer abcdefghijklmnopqrstuvwx", "abcdefghijklmnop"),
    ("url_password", "postgres://admin:hunter22@db.internal:5432/app", "hunter22"),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXk"),
    ("assignment", "export API_KEY=abc123def456", "abc123def456"),
    ("assignment", 'password: "correct-horse-battery"', "correct-horse"),
    ("assignment", "my password is hunter2hunter", "hunter2hunter"),
    ("assignment", "API key: 8f3a9c0d1e2f3a4b5c6d", "8f3a9c0d"),
    ("assignment", "client secret = Zq81xv0Pq2", "Zq81xv0Pq2"),
    ("azure_key", "AccountName=x;AccountKey=abcdefghijklmnopqrstuvwxyz0123==", "abcdefghijklmnopqrstuvwxyz0123"),
]


@pytest.mark.parametrize("kind,text,secret", CASES)
def test_each_credential_form_is_redacted(kind, text, secret):
    result = redact(text)
    assert secret not in result.text
    assert kind in result.kinds and f"[REDACTED:{kind}]" in result.text
    assert contains_secret(text)


@pytest.mark.parametrize("kind,text,secret", CASES)
def test_redaction_is_idempotent(kind, text, secret):
    once = redact(text).text
    twice = redact(once)
    assert twice.text == once and not twice.changed


@pytest.mark.parametrize("text", [
    "Keep the public API stable",
    "the token is expired, refresh it",
    "use https://example.com/docs for reference",
    "password reset flow must email the user",
    "skip the slow tests",
])
def test_ordinary_text_is_left_alone(text):
    assert redact(text).text == text and not contains_secret(text)


def test_url_keeps_its_user_and_host():
    assert redact("https://bob:s3cret@git.example.com/repo").text == "https://bob:[REDACTED:url_password]@git.example.com/repo"


def test_an_unterminated_private_key_block_is_redacted_to_the_end():
    assert redact("-----BEGIN RSA PRIVATE KEY-----\nMIIEow...").text == "[REDACTED:private_key]"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SEPARATORS = st.sampled_from([" ", "\n", "=", ": ", '"', "'", "(", ", ", "\t"])
FILLER = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(before=FILLER, left=SEPARATORS, case=st.sampled_from(CASES), right=SEPARATORS, after=FILLER)
def test_a_secret_token_is_redacted_whatever_surrounds_it(before, left, case, right, after):
    kind, text, secret = case  # context-recognised kinds carry their context inside ``text``
    result = redact(before + left + text + right + after)
    assert secret not in result.text
    assert redact(result.text).text == result.text


@pytest.mark.parametrize("unit", ["sk-", "eyJ-", "SG.a-", "x" * 30 + ".", "api_key", "password is a1"])
def test_long_adversarial_text_is_redacted_in_one_pass(unit):
    # Each of these made a pattern rescan the rest of the text from every word
    # boundary (quadratic: minutes for 200 kB). Now each is one linear pass.
    text = unit * (200_000 // len(unit))
    assert redact(text).text.count("[REDACTED:") <= len(text) // 6


def test_a_credential_name_with_a_prefix_keeps_the_prefix():
    assert redact("export OPENAI_API_KEY=abc123def456").text == "export OPENAI_API_KEY=[REDACTED:assignment]"
    assert redact("my.secret.token=abc123xyz").text == "my.secret.token=[REDACTED:assignment]"
