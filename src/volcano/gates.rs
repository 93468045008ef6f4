//! The Kubernetes feature gates that change a Volcano admission verdict.

use std::fmt;

/// The Kubernetes feature gates Volcano's webhook manager reads while validating, as set on its
/// command line (`--feature-gates`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `PodLevelResources`: a task template's pod-level `spec.resources` are checked against its
    /// containers' (on by default since Kubernetes 1.34); off, they are not checked.
    pub pod_level_resources: bool,
}

impl Default for FeatureGates {
    fn default() -> FeatureGates {
        FeatureGates {
            pod_level_resources: true,
        }
    }
}

impl FeatureGates {
    /// The gates [`FeatureGates::set`] knows, as Kubernetes names them.
    pub const KNOWN: [&str; 1] = ["PodLevelResources"];

    /// Turns the gate `name` on or off.
    ///
    /// # Errors
    /// [`UnknownGate`] when no admission verdict depends on `name`.
    pub fn set(&mut self, name: &str, enabled: bool) -> Result<(), UnknownGate> {
        match name {
            "PodLevelResources" => self.pod_level_resources = enabled,
            _ => {
                return Err(UnknownGate {
                    name: name.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// A feature gate that changes no admission verdict, so cannot be set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGate {
    /// The gate's name as given.
    pub name: String,
}

impl fmt::Display for UnknownGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "feature gate {:?} changes no admission verdict; known gates: {}",
            self.name,
            FeatureGates::KNOWN.join(", ")
        )
    }
}

impl std::error::Error for UnknownGate {}
