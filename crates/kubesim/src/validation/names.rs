//! String format checks with apimachinery's wording (`k8s.io/apimachinery/pkg/util/validation`).
//!
//! Each `is_*` function returns the list of problems as the messages the real server prints (empty when
//! the value is fine), so callers wrap them in `FieldError::invalid` exactly like Go does. The grammars
//! are matched by hand (no regex engine) because they run for every label, name and annotation of every
//! request.

use crate::errors::{BadValue, FieldError, FieldErrors};

pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const HTTP_PATH_FMT: &str = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+";

/// `MaxLenError` (1.34+ wording: bytes, not characters; see the recorded label-value error).
pub fn max_len_error(length: usize) -> String {
    LenUnit::Bytes.max_len_error(length)
}

/// The unit a "too long" problem names. apimachinery 1.34+ says `bytes` (what the recordings show and
/// what every top-level check here uses); the older `characters` is what the checks in [`legacy`]
/// print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LenUnit {
    Bytes,
    Characters,
}

impl LenUnit {
    fn max_len_error(self, length: usize) -> String {
        match self {
            Self::Bytes => format!("must be no more than {length} bytes"),
            Self::Characters => format!("must be no more than {length} characters"),
        }
    }
}

/// `EmptyError`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `InclusiveRangeError`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// `RegexError`: note the double space Go produces between examples (`'a',  or 'b'`).
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = String::with_capacity(msg.len() + fmt.len() + 64);
    s.push_str(msg);
    s.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(fmt);
    s.push_str("')");
    s
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f)
                && is_lower_alnum(l)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(matches_dns1123_label)
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            // A valid subdomain that is not a label can only be failing on its dots.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    dns1123_subdomain(value, LenUnit::Bytes)
}

fn dns1123_subdomain(value: &str, unit: LenUnit) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(unit.max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    dns1035_label(value, LenUnit::Bytes)
}

fn dns1035_label(value: &str, unit: LenUnit) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LENGTH {
        errs.push(unit.max_len_error(DNS1035_LABEL_MAX_LENGTH));
    }
    let ok = matches_dns1123_label(value) && value.as_bytes()[0].is_ascii_lowercase();
    if !ok {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_alnum(f)
                && is_alnum(l)
                && b.iter()
                    .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
        }
        _ => false,
    }
}

/// `IsQualifiedName`: label keys, annotation keys (lower-cased by the caller), finalizer names.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    qualified_name(value, LenUnit::Bytes)
}

fn qualified_name(value: &str, unit: LenUnit) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                for m in dns1123_subdomain(prefix, unit) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            unit.max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsConfigMapKey` (Secret and ConfigMap data keys).
pub fn is_config_map_key(value: &str) -> Vec<String> {
    config_map_key(value, LenUnit::Bytes)
}

fn config_map_key(value: &str, unit: LenUnit) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(unit.max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.');
    if !ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `IsValidPortNum`.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec![inclusive_range_error(1, 65535)]
    }
}

/// `IsValidPortName` (IANA_SVC_NAME).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty() || !port.bytes().all(|c| is_lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `IsRelaxedEnvVarName` (RelaxedEnvironmentVariableValidation is GA, so the relaxed rule applies).
pub fn is_relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push(format!("environment variable name {}", empty_error()));
    }
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .into(),
        );
    }
    errs
}

/// Go's `maskTrailingDash`: a generateName prefix may end in '-'.
fn mask_trailing_dash(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() > 1 && name.ends_with('-') {
        std::borrow::Cow::Owned(format!("{}a", &name[..name.len() - 1]))
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

/// `NameIsDNSSubdomain(name, prefix)`.
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_subdomain(&mask_trailing_dash(name))
    } else {
        is_dns1123_subdomain(name)
    }
}

/// `NameIsDNSLabel(name, prefix)` (namespaces, service accounts' label-shaped names).
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1123_label(&mask_trailing_dash(name))
    } else {
        is_dns1123_label(name)
    }
}

/// `NameIsDNS1035Label(name, prefix)` (Services).
pub fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        is_dns1035_label(&mask_trailing_dash(name))
    } else {
        is_dns1035_label(name)
    }
}

/// `path.ValidatePathSegmentName(name, prefix)`: the generic rule every object name must pass.
pub fn name_is_path_segment(name: &str, prefix: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if !prefix && (name == "." || name == "..") {
        errs.push(format!("may not be '{name}'"));
        return errs;
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// `IsDomainPrefixedPath`: `acme.io/foo` (used by `spec.managedBy`).
pub fn is_domain_prefixed_path(field: &str, value: &str) -> FieldErrors {
    if value.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let (host, path) = match value.split_once('/') {
        Some((h, p)) if !h.is_empty() && !p.is_empty() => (h, p),
        _ => {
            return vec![FieldError::invalid(
                field,
                BadValue::Str(value.to_string()),
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            )];
        }
    };
    let mut errs: FieldErrors = is_dns1123_subdomain(host)
        .into_iter()
        .map(|m| FieldError::invalid(field, BadValue::Str(host.to_string()), m))
        .collect();
    let path_ok = path.bytes().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'/' | b'-'
                    | b'.'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
            )
    });
    if !path_ok {
        errs.push(FieldError::invalid(
            field,
            BadValue::Str(path.to_string()),
            regex_error("Invalid path", HTTP_PATH_FMT, &[]),
        ));
    }
    errs
}

/// The same checks with the pre-1.34 length wording (`must be no more than 253 characters`), for the
/// fields the kinds validate themselves: Secret and ConfigMap keys, CRD names and group, Event
/// `reportingController` and namespace, Lease `spec.strategy`, Namespace `spec.finalizers`.
///
/// These once had their own implementation in `kinds::common`, which printed `characters`.
/// apimachinery has one `MaxLenError` for all of these checks and the recorded label-value error shows
/// it says `bytes` in v1.36, so this wording is most likely a slip; no recording covers these
/// messages, and this module keeps it until one does. Only the length message differs.
pub mod legacy {
    use super::LenUnit::Characters;

    /// `IsDNS1123Subdomain`.
    pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
        super::dns1123_subdomain(value, Characters)
    }

    /// `IsDNS1035Label`.
    pub fn is_dns1035_label(value: &str) -> Vec<String> {
        super::dns1035_label(value, Characters)
    }

    /// `IsConfigMapKey`.
    pub fn is_config_map_key(value: &str) -> Vec<String> {
        super::config_map_key(value, Characters)
    }

    /// `IsQualifiedName`.
    pub fn is_qualified_name(value: &str) -> Vec<String> {
        super::qualified_name(value, Characters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label_messages_match_the_recorded_namespace_error() {
        assert_eq!(
            is_dns1123_label("Bad_Name"),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()
            ]
        );
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert!(is_dns1123_label("ok-1").is_empty());
        assert_eq!(is_dns1123_label(&"a".repeat(64)).len(), 1);
        assert!(is_dns1123_label("").len() == 1);
        assert!(is_dns1123_label("-a").len() == 1);
    }

    #[test]
    fn subdomain_and_prefix_masking() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert_eq!(is_dns1123_subdomain("a..b").len(), 1);
        assert_eq!(is_dns1123_subdomain(&"a".repeat(254)).len(), 1);
        assert!(name_is_dns_subdomain("gen-", true).is_empty());
        assert_eq!(name_is_dns_subdomain("gen-", false).len(), 1);
        assert_eq!(name_is_dns_subdomain("Bad_Gen-", true).len(), 1);
        assert!(name_is_dns_subdomain(&"g".repeat(70), true).is_empty());
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(is_qualified_name("courier.dev/cleanup").is_empty());
        assert!(is_qualified_name("nodomain").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(is_qualified_name("a/b/c").len(), 1);
        assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        let e = is_qualified_name("x/");
        assert_eq!(e[0], "name part must be non-empty");
        assert_eq!(e.len(), 2);
        assert!(is_valid_label_value("").is_empty());
        assert_eq!(
            is_valid_label_value(&"n".repeat(64)),
            vec!["must be no more than 63 bytes"]
        );
        assert_eq!(is_valid_label_value("bad value").len(), 1);
    }

    #[test]
    fn config_keys_match_the_recorded_secret_error() {
        assert_eq!(
            is_config_map_key("bad/key"),
            vec![
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string()
            ]
        );
        assert_eq!(is_config_map_key("..x"), vec!["must not start with '..'"]);
    }

    #[test]
    fn domain_prefixed_paths() {
        assert!(is_domain_prefixed_path("f", "courier.dev/dispatcher").is_empty());
        assert_eq!(
            is_domain_prefixed_path("f", "dispatcher")[0].message(),
            "f: Invalid value: \"dispatcher\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        assert_eq!(
            is_domain_prefixed_path("f", "example.io/")[0].body(),
            "Invalid value: \"example.io/\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        assert_eq!(
            is_domain_prefixed_path("f", "")[0].message(),
            "f: Required value"
        );
        assert_eq!(is_domain_prefixed_path("f", "Bad/x").len(), 1);
        assert_eq!(is_domain_prefixed_path("f", "a.io/x y").len(), 1);
    }

    #[test]
    fn ports_and_env_names() {
        assert!(is_valid_port_name("http").is_empty());
        assert_eq!(is_valid_port_name("80").len(), 1);
        assert_eq!(is_valid_port_name("-a--b").len(), 2);
        assert_eq!(
            is_valid_port_num(0),
            vec!["must be between 1 and 65535, inclusive"]
        );
        assert!(is_relaxed_env_var_name("MY VAR.1").is_empty());
        assert_eq!(is_relaxed_env_var_name("A=B").len(), 1);
        assert_eq!(name_is_path_segment("..", false), vec!["may not be '..'"]);
        assert_eq!(name_is_path_segment("a/b%", false).len(), 2);
    }

    #[test]
    fn legacy_checks_differ_only_in_the_length_unit() {
        assert_eq!(
            is_dns1123_label("Bad_Name"),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert!(is_dns1123_label("ok-1").is_empty());
        assert_eq!(
            legacy::is_config_map_key("bad/key"),
            vec![
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(legacy::is_config_map_key(".."), vec!["must not be '..'"]);
        assert_eq!(
            legacy::is_config_map_key("..x"),
            vec!["must not start with '..'"]
        );
        assert!(legacy::is_qualified_name("courier.dev/dispatcher").is_empty());
        assert!(legacy::is_qualified_name("kubernetes").is_empty());
        assert_eq!(
            legacy::is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(legacy::is_dns1035_label("1abc").len(), 1);
        assert_eq!(
            legacy::is_dns1123_subdomain(&"a".repeat(254))[0],
            "must be no more than 253 characters"
        );
        assert_eq!(
            is_dns1123_subdomain(&"a".repeat(254))[0],
            "must be no more than 253 bytes"
        );
    }
}
