//! Field paths spelled out only when an error names them (`field.Path`). Validation visits every field
//! of every write and nearly all of them are valid, so a path is a chain of borrowed segments on the
//! stack until a `FieldError` turns it into its string.

use std::fmt;

/// `parent.child`, `parent[i]` and `parent[key]` as `field.Path` renders them.
#[derive(Debug, Clone, Copy)]
pub enum Path<'a> {
    Root(&'a str),
    Child(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
    Key(&'a Path<'a>, &'a str),
}

impl<'a> Path<'a> {
    pub fn new(root: &'a str) -> Self {
        Path::Root(root)
    }

    /// `self.c`.
    pub fn child(&'a self, c: &'a str) -> Path<'a> {
        Path::Child(self, c)
    }

    /// `self[i]`.
    pub fn index(&'a self, i: usize) -> Path<'a> {
        Path::Index(self, i)
    }

    /// `self[k]` (unquoted, like `field.Path.Key`).
    pub fn key(&'a self, k: &'a str) -> Path<'a> {
        Path::Key(self, k)
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root(s) => f.write_str(s),
            Path::Child(p, c) => write!(f, "{p}.{c}"),
            Path::Index(p, i) => write!(f, "{p}[{i}]"),
            Path::Key(p, k) => write!(f, "{p}[{k}]"),
        }
    }
}

impl From<Path<'_>> for String {
    fn from(p: Path<'_>) -> String {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Path;

    /// One step below a path: a field, an index or a map key.
    #[derive(Debug, Clone)]
    enum Step {
        Child(String),
        Index(usize),
        Key(String),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            "[a-zA-Z0-9./\\[\\]-]{0,12}".prop_map(Step::Child),
            (0usize..10_000).prop_map(Step::Index),
            "[a-zA-Z0-9./\\[\\]-]{0,12}".prop_map(Step::Key),
        ]
    }

    /// The eager spelling the validators used before: one `format!` per step.
    fn eager(root: &str, steps: &[Step]) -> String {
        let mut s = root.to_string();
        for st in steps {
            s = match st {
                Step::Child(c) => format!("{s}.{c}"),
                Step::Index(i) => format!("{s}[{i}]"),
                Step::Key(k) => format!("{s}[{k}]"),
            };
        }
        s
    }

    fn lazy(p: Path<'_>, steps: &[Step]) -> String {
        match steps.split_first() {
            None => String::from(p),
            Some((Step::Child(c), rest)) => lazy(p.child(c), rest),
            Some((Step::Index(i), rest)) => lazy(p.index(*i), rest),
            Some((Step::Key(k), rest)) => lazy(p.key(k), rest),
        }
    }

    proptest! {
        #[test]
        fn a_path_renders_as_the_eager_format(root in "[a-z.]{0,10}", steps in prop::collection::vec(step(), 0..8)) {
            prop_assert_eq!(lazy(Path::new(&root), &steps), eager(&root, &steps));
        }
    }
}
