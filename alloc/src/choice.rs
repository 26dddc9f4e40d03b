//! Which policies a replay runs: vramlab's by name, PyTorch's under settings strings, or, for
//! a snapshot that names them, the settings it was recorded with.

use experiments::{AllocConf, BackendKind, PolicyResult, PolicySpec, Trace, POLICIES};
use rayon::prelude::*;

use super::{build_policy, build_pytorch_policy, min_capacity_of, replay_policy, Policy, ReplayOptions, SimDevice};

/// One policy a replay runs.
#[derive(Debug, Clone)]
pub enum PolicyChoice {
    /// One of vramlab's policies, by name with parameters.
    Named(PolicySpec),
    /// PyTorch's allocator under a `PYTORCH_ALLOC_CONF`, as written and as parsed.
    Pytorch {
        /// The string as given (the label shows it).
        settings: String,
        /// What it means.
        conf: AllocConf,
    },
}

impl PolicyChoice {
    /// PyTorch's allocator under `settings`, or the parser's one-line error.
    pub fn pytorch(settings: &str) -> Result<PolicyChoice, experiments::Error> {
        Ok(PolicyChoice::Pytorch {
            settings: settings.to_string(),
            conf: AllocConf::parse(settings)?,
        })
    }

    /// How results name it.
    pub fn label(&self) -> String {
        match self {
            PolicyChoice::Named(spec) => spec.label(),
            PolicyChoice::Pytorch { settings, .. } => format!("PYTORCH_ALLOC_CONF={settings}"),
        }
    }

    /// A fresh policy.
    pub fn build(&self) -> Box<dyn Policy> {
        match self {
            PolicyChoice::Named(spec) => build_policy(spec).expect("checked when the choice was made"),
            PolicyChoice::Pytorch { conf, .. } => build_pytorch_policy(conf),
        }
    }

    /// Whether this replays `trace` under the settings it was recorded with.
    pub fn is_recording_of(&self, trace: &Trace) -> bool {
        match (self, &trace.allocator_settings) {
            (PolicyChoice::Pytorch { conf, .. }, Some(recorded)) => {
                AllocConf::parse(recorded).is_ok_and(|r| &r == conf)
            }
            _ => false,
        }
    }
}

/// The policies to run: `policy` (a comma-separated list, or `all`) and every `alloc_conf`;
/// with neither, a snapshot's own settings, or else every policy.
pub fn choose_policies(
    trace: &Trace,
    policy: Option<&str>,
    alloc_conf: &[String],
) -> Result<Vec<PolicyChoice>, experiments::Error> {
    let mut choices = Vec::new();
    let named = match (policy, alloc_conf.is_empty(), &trace.allocator_settings) {
        (Some(policy), _, _) => Some(policy),
        (None, true, None) => Some("all"),
        _ => None,
    };
    if let Some(named) = named {
        let specs = if named == "all" {
            POLICIES
                .iter()
                .map(|p| PolicySpec::parse(p.name))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            PolicySpec::parse_list(named)?
        };
        for spec in specs {
            build_policy(&spec)?;
            choices.push(PolicyChoice::Named(spec));
        }
    }
    let own = (alloc_conf.is_empty() && policy.is_none())
        .then(|| trace.allocator_settings.clone())
        .flatten();
    for settings in alloc_conf.iter().cloned().chain(own) {
        choices.push(PolicyChoice::pytorch(&settings)?);
    }
    if choices.is_empty() {
        return Err(experiments::Error::Invalid("the policy list names no policy".into()));
    }
    Ok(choices)
}

/// Replays `trace` under every choice in parallel (simulated, under `options.capacity`), each with the smallest capacity
/// it fits under. A choice that is the trace's own recording is replayed over the addresses
/// its driver gave, and checked against every device operation it recorded.
pub fn replay_choices(
    trace: &Trace,
    choices: &[PolicyChoice],
    device_bytes: u64,
    options: ReplayOptions,
) -> Result<Vec<PolicyResult>, experiments::Error> {
    choices
        .par_iter()
        .map(|choice| {
            let own = choice.is_recording_of(trace);
            let mut device = if own {
                SimDevice::following(device_bytes, trace)
            } else {
                SimDevice::new(device_bytes)
            };
            let options = ReplayOptions {
                check_recorded: own,
                ..options
            };
            // The replay and the search for the smallest cap are independent: run them side by side.
            let (result, min_capacity) = rayon::join(
                || {
                    replay_policy(
                        trace,
                        &choice.label(),
                        choice.build(),
                        &mut device,
                        options,
                        &mut (),
                        BackendKind::Sim,
                    )
                },
                || min_capacity_of(trace, &|| choice.build(), device_bytes),
            );
            let mut result = result?;
            result.min_capacity_bytes = min_capacity?;
            Ok(result)
        })
        .collect()
}
