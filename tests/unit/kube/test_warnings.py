"""The API server's ``Warning`` headers, parsed as client-go parses them."""

from __future__ import annotations

from operators.kube.api import parse_warnings


def test_pod_security_warning_as_the_api_server_writes_it() -> None:
    header = (
        '299 - "would violate PodSecurity \\"restricted:latest\\": seccompProfile (pod or '
        'container \\"c\\" must set securityContext.seccompProfile.type to \\"RuntimeDefault\\" '
        'or \\"Localhost\\")"'
    )
    (text,) = parse_warnings([header])
    assert text.startswith('would violate PodSecurity "restricted:latest": seccompProfile')
    assert text.endswith('"RuntimeDefault" or "Localhost")')


def test_several_warnings_in_one_value_and_in_several_values() -> None:
    values = [
        '299 - "first", 299 - "second, with a comma"',
        '299 kube-apiserver "third" "Sat, 01 Jan 2000 00:00:00 GMT"',
    ]
    assert parse_warnings(values) == ["first", "second, with a comma", "third"]


def test_only_code_299_counts() -> None:
    assert parse_warnings(['199 - "miscellaneous"', "garbage"]) == []
