//! A small command-line parser: positional arguments, `--name value`,
//! `--name=value`, flags, and a few short aliases. Every mistake is a usage
//! error (exit status 2) that names the command and the argument.

use crate::util::Fail;

/// What a command accepts.
pub struct Spec {
    /// The command's name, for messages.
    pub name: &'static str,
    /// The whole `--help` text, with an example.
    pub help: &'static str,
    /// Long options that take a value (without the leading `--`).
    pub values: &'static [&'static str],
    /// Long options that take none.
    pub flags: &'static [&'static str],
    /// Fewest and most positional arguments.
    pub positional: (usize, usize),
}

/// Parsed arguments of one command.
pub struct Args {
    pub spec: &'static Spec,
    pub positional: Vec<String>,
    options: Vec<(&'static str, Option<String>)>,
}

/// The short aliases every command shares.
fn long_name(short: &str) -> Option<&'static str> {
    Some(match short {
        "-o" => "output",
        "-f" => "force",
        "-q" => "quiet",
        "-h" => "help",
        _ => return None,
    })
}

impl Args {
    /// Parses `argv` (the words after the command) against `spec`. `--help`
    /// prints the help text and ends the command successfully.
    pub fn parse(argv: &[String], spec: &'static Spec) -> Result<Args, Fail> {
        let mut args = Args { spec, positional: Vec::new(), options: Vec::new() };
        let mut words = argv.iter();
        let mut only_positional = false;
        while let Some(word) = words.next() {
            if only_positional || word == "-" || !word.starts_with('-') || word.parse::<f64>().is_ok() {
                args.positional.push(word.clone());
                continue;
            }
            if word == "--" {
                only_positional = true;
                continue;
            }
            let (name, inline) = match word.strip_prefix("--") {
                Some(long) => match long.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                },
                None => match long_name(word) {
                    Some(n) => (n.to_string(), None),
                    None => return Err(args.usage(format!("unknown option {word}"))),
                },
            };
            if name == "help" {
                crate::util::out(spec.help.as_bytes())?;
                return Err(Fail::Quiet(0));
            }
            if let Some(&n) = spec.flags.iter().find(|&&f| f == name) {
                if inline.is_some() {
                    return Err(args.usage(format!("--{n} takes no value")));
                }
                args.options.push((n, None));
            } else if let Some(&n) = spec.values.iter().find(|&&f| f == name) {
                let value = match inline {
                    Some(v) => v,
                    None => words.next().cloned().ok_or_else(|| args.usage(format!("--{n} needs a value")))?,
                };
                args.options.push((n, Some(value)));
            } else {
                return Err(args.usage(format!("unknown option --{name}")));
            }
        }
        let (lo, hi) = spec.positional;
        if args.positional.len() < lo {
            return Err(args.usage("missing arguments".into()));
        }
        if args.positional.len() > hi {
            return Err(args.usage(format!("unexpected argument {:?}", args.positional[hi])));
        }
        Ok(args)
    }

    /// A usage error of this command.
    pub fn usage(&self, what: String) -> Fail {
        Fail::Usage(format!("vds {}: {what} (see `vds {} --help`)", self.spec.name, self.spec.name))
    }

    /// Whether a flag was given.
    pub fn flag(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == name)
    }

    /// The last value of an option.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options.iter().rev().find(|(n, _)| *n == name).and_then(|(_, v)| v.as_deref())
    }

    /// Every value of a repeatable option, in order.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.options.iter().filter(|(n, _)| *n == name).filter_map(|(_, v)| v.as_deref()).collect()
    }

    /// An option parsed with `parse`, whose error becomes a usage error naming the option.
    pub fn parsed<T>(&self, name: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, Fail> {
        self.value(name).map(|v| parse(v).map_err(|e| self.usage(format!("--{name} {v:?}: {e}")))).transpose()
    }

    /// The `i`th positional argument, if given.
    pub fn pos(&self, i: usize) -> Option<&str> {
        self.positional.get(i).map(String::as_str)
    }
}

/// Parses a comma-separated list of unsigned integers: `64,64,64`.
pub fn u64_list(s: &str) -> Result<Vec<u64>, String> {
    s.split(',').map(|p| p.trim().parse::<u64>().map_err(|_| format!("{p:?} is not a non-negative integer"))).collect()
}
