//! `/dags/validate`: a DAG's dependencies are all defined and form no cycle.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::registry::{Answer, Handler, Ruling, Unavailable};
use crate::admission::{API_VERSION, MAX_REASON_BYTES, clean_reason};

/// The path of [`DagValidation`].
pub const PATH: &str = "/dags/validate";

/// A request: the DAG's tasks and what each depends on, in Dexaflow's DAGSpec field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DagRequest {
    /// Always `dexaflow.io/admission/v1`.
    pub api_version: String,
    /// The id the answer echoes.
    pub uid: String,
    /// The DAG.
    pub dag: Dag,
}

/// A DAG as the request carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dag {
    /// The DAG's id.
    pub dag_id: String,
    /// Its tasks.
    pub tasks: Vec<DagTask>,
}

/// One task and the tasks it depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DagTask {
    /// The task's id, unique in the DAG.
    pub task_id: String,
    /// The ids of the tasks that must finish first.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DagAnswer {
    /// The request's `api_version`.
    pub api_version: String,
    /// The request's `uid`.
    pub uid: String,
    /// Whether the DAG is valid.
    pub allowed: bool,
    /// Why not, cleaned and capped at [`crate::admission::MAX_REASON_BYTES`] as a hook's reason
    /// is; `None` when allowed.
    pub reason: Option<String>,
}

/// `/dags/validate`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DagValidation;

impl Handler for DagValidation {
    type Request = DagRequest;
    type Response = DagAnswer;

    fn uid(request: &DagRequest) -> &str {
        &request.uid
    }

    async fn handle(
        &self,
        request: DagRequest,
        _deadline: Instant,
    ) -> Result<Answer<DagAnswer>, Unavailable> {
        let problem = if request.api_version == API_VERSION {
            problem(&request.dag)
        } else {
            Some(format!(
                "api_version: expected {API_VERSION:?}, got {:?}",
                request.api_version
            ))
        };
        // Task ids are the caller's text, any length: the reason is cleaned and capped as a
        // hook's is, so that a cycle through long ids cannot make the answer as large as the
        // request, nor carry control characters to a log or a terminal.
        let reason = problem.map(|text| clean_reason(&text));
        Ok(Answer {
            ruling: if reason.is_none() {
                Ruling::Allowed
            } else {
                Ruling::Denied
            },
            body: DagAnswer {
                api_version: request.api_version,
                uid: request.uid,
                allowed: reason.is_none(),
                reason,
            },
        })
    }
}

/// What is wrong with `dag`, or `None`: a task defined twice, a dependency on a task that is
/// not defined, or one cycle, found in O(V+E).
pub fn problem(dag: &Dag) -> Option<String> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(dag.tasks.len());
    for (position, task) in dag.tasks.iter().enumerate() {
        if index.insert(&task.task_id, position).is_some() {
            return Some(format!("task {:?} is defined more than once", task.task_id));
        }
    }
    let mut edges: Vec<Vec<usize>> = Vec::with_capacity(dag.tasks.len());
    for task in &dag.tasks {
        let mut targets = Vec::with_capacity(task.depends_on.len());
        for target in &task.depends_on {
            let Some(&position) = index.get(target.as_str()) else {
                return Some(format!(
                    "task {:?} depends on {target:?}, which is not defined",
                    task.task_id
                ));
            };
            targets.push(position);
        }
        edges.push(targets);
    }
    find_cycle(&edges).map(|cycle| {
        let names: Vec<&str> = cycle
            .iter()
            .map(|&position| dag.tasks[position].task_id.as_str())
            .collect();
        describe_cycle(&names)
    })
}

/// The reason for the cycle through `names` (the first repeated at the end): the whole cycle
/// when it fits in a reason, else its length and as much of its start as fits, ending in `…`,
/// so that the cut does not read as where the cycle closes.
fn describe_cycle(names: &[&str]) -> String {
    const WHOLE: &str = "dependency cycle: ";
    const ARROW: &str = " -> ";
    const MORE: &str = " -> …";
    let whole = WHOLE.len()
        + names.iter().map(|name| name.len()).sum::<usize>()
        + ARROW.len() * (names.len() - 1);
    if whole <= MAX_REASON_BYTES {
        return format!("{WHOLE}{}", names.join(ARROW));
    }
    let mut text = format!("dependency cycle of {} tasks: ", names.len() - 1);
    for (position, name) in names.iter().enumerate() {
        let arrow = if position == 0 { "" } else { ARROW };
        if position > 0 && text.len() + arrow.len() + name.len() + MORE.len() > MAX_REASON_BYTES {
            break;
        }
        text.push_str(arrow);
        text.push_str(name);
    }
    text.push_str(MORE);
    text
}

/// One cycle in the graph `edges` (`edges[v]` lists what `v` depends on), as the tasks along it
/// with the first repeated at the end; `None` when the graph is acyclic. An iterative
/// depth-first search, each vertex and edge visited once.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut marks = vec![Mark::New; edges.len()];
    // The path being explored: a vertex and how many of its edges were followed.
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..edges.len() {
        if marks[start] != Mark::New {
            continue;
        }
        marks[start] = Mark::OnPath;
        path.push((start, 0));
        while let Some(&mut (vertex, ref mut next)) = path.last_mut() {
            let Some(&target) = edges[vertex].get(*next) else {
                marks[vertex] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match marks[target] {
                Mark::New => {
                    marks[target] = Mark::OnPath;
                    path.push((target, 0));
                }
                Mark::OnPath => {
                    let from = path
                        .iter()
                        .position(|&(on_path, _)| on_path == target)
                        .expect("a vertex marked on the path is on it");
                    let mut cycle: Vec<usize> = path[from..].iter().map(|&(v, _)| v).collect();
                    cycle.push(target);
                    return Some(cycle);
                }
                Mark::Done => {}
            }
        }
    }
    None
}
