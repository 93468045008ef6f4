//! The cluster reads through the real Kubernetes client against an API server on 127.0.0.1:
//! the queue cache (list, watch, bookmarks, a broken watch, 401, 403 and 500, a list or watch
//! never answered, a watch that ends at once) and a namespace's
//! annotation (found, missing, too slow), and how the client is found.

use crate::apiserver::ApiServer;
use crate::serve_support::eventually;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dexaflow_admission::cluster::{
    self, Cache, ClusterError, NamespaceError, Namespaces, QUEUES, Watching,
};
use dexaflow_admission::events::ClusterEvents;
use dexaflow_admission::volcano::Queue;
use serde_json::json;
use tokio::time::Instant;

const TOKEN: &str = "s3cret-token";

/// Counts what the cache reports.
#[derive(Default)]
struct Counted {
    synced: AtomicUsize,
    updated: AtomicUsize,
    failed: AtomicUsize,
}

impl ClusterEvents for Counted {
    fn cache_synced(&self, resource: &str) {
        assert_eq!(resource, "queues");
        self.synced.fetch_add(1, Ordering::SeqCst);
    }

    fn cache_updated(&self, _resource: &str) {
        self.updated.fetch_add(1, Ordering::SeqCst);
    }

    fn watch_failed(&self, _resource: &str) {
        self.failed.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client of `server` with `token`, through a kubeconfig file.
async fn client(server: &ApiServer, token: &str) -> (kube::Client, tempfile::TempDir) {
    client_waiting(server, token, cluster::REQUEST_TIMEOUT).await
}

/// A client of `server` with `token` whose requests wait `request_timeout` for a response.
async fn client_waiting(
    server: &ApiServer,
    token: &str,
    request_timeout: Duration,
) -> (kube::Client, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = server.kubeconfig(dir.path(), token);
    let client = cluster::connect(Some((&path, "server.kubeconfig")), None, request_timeout)
        .await
        .expect("a client from the kubeconfig");
    (client, dir)
}

/// The error of making a client from the kubeconfig at `path` (as `server.kubeconfig`), which
/// the test expects to fail because of `why`.
async fn refused_kubeconfig(path: &std::path::Path, why: &str) -> ClusterError {
    match cluster::connect(
        Some((path, "server.kubeconfig")),
        None,
        cluster::REQUEST_TIMEOUT,
    )
    .await
    {
        Err(error) => error,
        Ok(_) => panic!("{why}, yet a client was made"),
    }
}

struct Watched {
    cache: Arc<Cache<Queue>>,
    events: Arc<Counted>,
    _watching: Watching,
    _dir: tempfile::TempDir,
}

async fn watch(server: &ApiServer, token: &str) -> Watched {
    watch_waiting(server, token, cluster::REQUEST_TIMEOUT).await
}

/// The queue cache through a client whose requests wait `request_timeout` for a response.
async fn watch_waiting(server: &ApiServer, token: &str, request_timeout: Duration) -> Watched {
    let (client, dir) = client_waiting(server, token, request_timeout).await;
    let events = Arc::new(Counted::default());
    let (cache, watching) = Cache::<Queue>::watch(client, QUEUES, events.clone());
    Watched {
        cache,
        events,
        _watching: watching,
        _dir: dir,
    }
}

async fn until_synced(watched: &Watched) {
    let cache = Arc::clone(&watched.cache);
    eventually("the queue cache synced", move || {
        let synced = cache.is_synced();
        async move { synced.then_some(()) }
    })
    .await;
}

/// Waits until the cache has told its events of a failed list or watch (`what`).
async fn until_failed(watched: &Watched, what: &str) {
    let events = Arc::clone(&watched.events);
    eventually(what, move || {
        let failed = events.failed.load(Ordering::SeqCst);
        async move { (failed > 0).then_some(()) }
    })
    .await;
}

async fn until_present(watched: &Watched, name: &str, present: bool) {
    let cache = Arc::clone(&watched.cache);
    let name = name.to_owned();
    eventually("the queue in the cache", move || {
        let found = cache.get(&name).is_some();
        async move { (found == present).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_queues_are_found_by_name_once_the_cache_synced() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.put_queue("research", json!({"weight": 4}));

    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;

    let research = watched.cache.get("research").expect("listed");
    assert_eq!(research.spec.weight, 4);
    assert!(watched.cache.get("absent").is_none());
    assert_eq!(watched.cache.all().len(), 2);
    assert_eq!(watched.events.synced.load(Ordering::SeqCst), 1);
    assert_eq!(watched.events.failed.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_added_changed_and_deleted_after_the_list_reach_the_cache_through_the_watch() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;

    server.put_queue("later", json!({"weight": 2}));
    until_present(&watched, "later", true).await;
    server.bookmark();
    server.put_queue("later", json!({"weight": 7}));
    let cache = Arc::clone(&watched.cache);
    eventually("the changed weight", move || {
        let weight = cache.get("later").map(|queue| queue.spec.weight);
        async move { (weight == Some(7)).then_some(()) }
    })
    .await;
    server.delete_queue("default");
    until_present(&watched, "default", false).await;

    assert!(
        watched.cache.get("later").is_some(),
        "the bookmark removed nothing"
    );
    let lists = server
        .requests()
        .iter()
        .filter(|request| !request.contains("watch="))
        .count();
    assert_eq!(
        lists,
        1,
        "one list, then only the watch: {:?}",
        server.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_queue_that_does_not_decode_is_left_out_and_the_others_are_cached() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.put_queue("research", json!({"weight": "heavy"}));

    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;

    assert!(watched.cache.get("research").is_none(), "left out");
    assert!(watched.cache.get("default").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_changed_into_one_that_does_not_decode_leaves_the_cache_rather_than_keeping_its_earlier_version()
 {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.put_queue("research", json!({"weight": 1}));
    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;
    assert!(watched.cache.get("research").is_some());

    // Closed now, and not a queue the cache can read: the Open copy must not answer for it.
    server.put_queue_in_state("research", json!({"weight": "heavy"}), "Closed");
    until_present(&watched, "research", false).await;

    assert!(
        watched.cache.get("default").is_some(),
        "only the changed queue left"
    );
    server.put_queue_in_state("research", json!({"weight": 1}), "Closed");
    let cache = Arc::clone(&watched.cache);
    eventually("the readable version cached", move || {
        let state = cache
            .get("research")
            .map(|queue| queue.status.state.clone());
        async move { (state.as_deref() == Some("Closed")).then_some(()) }
    })
    .await;
}

/// The names in the cache's group `parent`.
fn members(cache: &Cache<Queue>, parent: &str) -> Vec<String> {
    cache
        .group(parent)
        .iter()
        .map(|queue| queue.name().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_moved_to_another_parent_or_deleted_leaves_its_old_parent_s_children() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("team-b", json!({"weight": 1, "parent": "research"}));
    server.put_queue("team-a", json!({"weight": 1, "parent": "research"}));
    server.put_queue("ops", json!({"weight": 1, "parent": "root"}));
    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;
    assert_eq!(members(&watched.cache, "research"), ["team-a", "team-b"]);

    server.put_queue("team-b", json!({"weight": 1, "parent": "root"}));
    server.delete_queue("team-a");
    let cache = Arc::clone(&watched.cache);
    eventually("team-a gone and team-b moved", move || {
        let moved = cache.get("team-a").is_none() && members(&cache, "root").len() == 2;
        async move { moved.then_some(()) }
    })
    .await;

    assert_eq!(members(&watched.cache, "root"), ["ops", "team-b"]);
    assert!(
        members(&watched.cache, "research").is_empty(),
        "no child left under the old parent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_broken_mid_stream_is_resumed_and_sees_later_changes() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;
    let watching = || async { (server.watches() > 0).then_some(()) };
    eventually("a watch open", watching).await;

    server.break_watches();
    server.put_queue("after-the-break", json!({"weight": 3}));

    until_present(&watched, "after-the-break", true).await;
    assert!(
        watched.cache.is_synced(),
        "still synced: the cache kept what it held"
    );
    assert!(watched.cache.get("default").is_some());
    assert_eq!(watched.events.synced.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_list_is_reported_and_the_cache_stays_unsynced_until_allowed() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.forbid(true);
    let watched = watch(&server, TOKEN).await;

    until_failed(&watched, "a failed list reported").await;
    assert!(!watched.cache.is_synced());
    assert!(
        watched.cache.get("default").is_none(),
        "nothing from a list never made"
    );

    server.forbid(false);
    until_synced(&watched).await;
    assert!(watched.cache.get("default").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_failing_with_500_is_retried_and_reported_and_the_cache_syncs_only_once_it_succeeds()
{
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.fail_lists(true);
    let watched = watch(&server, TOKEN).await;

    let events = Arc::clone(&watched.events);
    let lists = || async { (server.lists() >= 2).then_some(()) };
    eventually("the failed list tried again", lists).await;
    let failed = events.failed.load(Ordering::SeqCst);
    assert!(failed >= 1, "each failure reported: {failed}");
    assert!(!watched.cache.is_synced());
    assert!(watched.cache.get("default").is_none());

    server.fail_lists(false);
    until_synced(&watched).await;
    assert!(watched.cache.get("default").is_some());
}

/// Long enough for a local answer, short for a test to wait on one that never comes.
const SHORT_REQUEST_TIMEOUT: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_the_api_server_never_answers_fails_is_reported_and_is_tried_again() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.hang_lists(true);
    let watched = watch_waiting(&server, TOKEN, SHORT_REQUEST_TIMEOUT).await;

    until_failed(&watched, "the unanswered list reported").await;
    assert!(!watched.cache.is_synced(), "unready: nothing was listed");
    assert!(watched.cache.get("default").is_none());

    server.hang_lists(false);
    until_synced(&watched).await;
    assert!(server.lists() >= 2, "listed again: {:?}", server.requests());
    assert!(watched.cache.get("default").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_response_never_begins_fails_and_is_reported_while_the_cache_keeps_its_list()
{
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.hang_watches(true);
    let watched = watch_waiting(&server, TOKEN, SHORT_REQUEST_TIMEOUT).await;
    until_synced(&watched).await;

    until_failed(&watched, "the unanswered watch reported").await;
    assert!(watched.cache.is_synced(), "the list is kept");
    assert!(watched.cache.get("default").is_some());

    server.hang_watches(false);
    let watching = || async { (server.watches() > 0).then_some(()) };
    eventually("a watch open once answered", watching).await;
    server.put_queue("later", json!({"weight": 2}));
    until_present(&watched, "later", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_ends_at_once_without_an_event_is_reported_each_time_and_not_reopened_in_a_loop()
 {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    server.end_watches_at_once(true);
    let watched = watch(&server, TOKEN).await;
    until_synced(&watched).await;

    // The first is reported at once, the second after the first backoff (about a second).
    let events = Arc::clone(&watched.events);
    eventually("two watches that ended at once reported", move || {
        let failed = events.failed.load(Ordering::SeqCst);
        async move { (failed >= 2).then_some(()) }
    })
    .await;
    let failed = watched.events.failed.load(Ordering::SeqCst);
    let watches = server.watches_asked();

    // Each watch asked for was reported; at most the next one has begun since.
    assert!(
        watches <= failed + 1,
        "{watches} watches asked for, {failed} reported"
    );
    assert!(watched.cache.is_synced(), "the list is kept");
    assert!(watched.cache.get("default").is_some());
    assert_eq!(
        server.lists(),
        1,
        "not listed again: {:?}",
        server.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_and_the_cache_never_syncs() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    let watched = watch(&server, "not-the-token").await;

    until_failed(&watched, "a refused list reported").await;

    assert!(!watched.cache.is_synced());
    assert_eq!(watched.events.synced.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_annotation_is_read_and_an_absent_one_is_none() {
    let server = ApiServer::start(TOKEN).await;
    server.put_team_a_in_research();
    let (client, _dir) = client(&server, TOKEN).await;
    let namespaces = Namespaces::new(client);
    let deadline = Instant::now() + Duration::from_secs(10);

    let queue = namespaces
        .annotation("team-a", "scheduling.volcano.sh/queue-name", deadline)
        .await
        .expect("read");
    let other = namespaces
        .annotation("team-a", "example.com/other", deadline)
        .await
        .expect("read");

    assert_eq!(queue.as_deref(), Some("research"));
    assert_eq!(other, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_namespace_is_not_found_naming_it() {
    let server = ApiServer::start(TOKEN).await;
    let (client, _dir) = client(&server, TOKEN).await;

    let error = Namespaces::new(client)
        .annotation(
            "ghost",
            "scheduling.volcano.sh/queue-name",
            Instant::now() + Duration::from_secs(10),
        )
        .await
        .expect_err("no such namespace");

    assert!(matches!(&error, NamespaceError::NotFound { namespace } if namespace == "ghost"));
    assert_eq!(error.to_string(), "namespace \"ghost\" not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_namespace_read_says_the_api_server_s_code_and_message_and_no_debug_dump() {
    let server = ApiServer::start(TOKEN).await;
    server.put_namespace("team", json!({}));
    let (client, _dir) = client(&server, TOKEN).await;
    server.forbid(true);

    let error = Namespaces::new(client)
        .annotation(
            "team",
            "scheduling.volcano.sh/queue-name",
            Instant::now() + Duration::from_secs(10),
        )
        .await
        .expect_err("forbidden");

    assert!(
        matches!(&error, NamespaceError::Refused { namespace, code: 403, .. } if namespace == "team"),
        "{error:?}"
    );
    let text = dexaflow_admission::admission::error_chain(&error);
    assert!(
        text.starts_with("reading namespace \"team\": the API server answered 403: ")
            && text.contains("is forbidden"),
        "{text}"
    );
    assert!(!text.contains("Status {"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_read_the_api_server_answers_too_late_gives_up_at_the_deadline() {
    let server = ApiServer::start(TOKEN).await;
    server.put_namespace("team-a", json!({}));
    server.delay_namespaces(Duration::from_secs(30));
    let (client, _dir) = client(&server, TOKEN).await;

    let error = Namespaces::new(client)
        .annotation(
            "team-a",
            "scheduling.volcano.sh/queue-name",
            Instant::now() + Duration::from_millis(100),
        )
        .await
        .expect_err("too late");

    assert!(matches!(error, NamespaceError::TimedOut { .. }), "{error}");
}

/// A kubeconfig for `server`, written in `dir`, whose user reads its token from a file there
/// holding `contents`: the token file's path and the kubeconfig's.
fn kubeconfig_with_token_text(
    server: &ApiServer,
    dir: &std::path::Path,
    contents: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let token_file = dir.join("token");
    std::fs::write(&token_file, contents).expect("write the token");
    let path = server.kubeconfig_with_token_file(dir, &token_file);
    (token_file, path)
}

/// A client from the kubeconfig at `path`, given as `server.kubeconfig`.
async fn connect_by_kubeconfig(path: &std::path::Path) -> Result<kube::Client, ClusterError> {
    cluster::connect(
        Some((path, "server.kubeconfig")),
        None,
        cluster::REQUEST_TIMEOUT,
    )
    .await
}

/// The queue the namespace `team-a` names, read through `namespaces`.
async fn queue_annotation_of_team_a(
    namespaces: &Namespaces,
) -> Result<Option<String>, NamespaceError> {
    namespaces
        .annotation(
            "team-a",
            "scheduling.volcano.sh/queue-name",
            Instant::now() + Duration::from_secs(10),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_token_file_ending_in_a_newline_authenticates_with_its_token_trimmed() {
    let server = ApiServer::start(TOKEN).await;
    server.put_team_a_in_research();
    let dir = tempfile::tempdir().expect("a directory");
    let (_, path) = kubeconfig_with_token_text(&server, dir.path(), &format!("{TOKEN}\n"));

    let client = connect_by_kubeconfig(&path)
        .await
        .expect("a client from the kubeconfig");
    let queue = queue_annotation_of_team_a(&Namespaces::new(client)).await;

    // The server answers 401 to any other Authorization header than the token's.
    assert_eq!(queue.expect("authenticated").as_deref(), Some("research"));
    assert_eq!(server.requests().len(), 1, "{:?}", server.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_kubeconfig_token_file_is_sent_from_the_next_request() {
    let server = ApiServer::start(TOKEN).await;
    server.put_namespace("team-a", json!({}));
    let dir = tempfile::tempdir().expect("a directory");
    let (token_file, path) = kubeconfig_with_token_text(&server, dir.path(), &format!("{TOKEN}\n"));
    let client = connect_by_kubeconfig(&path)
        .await
        .expect("a client from the kubeconfig");
    let namespaces = Namespaces::new(client);
    let read = || queue_annotation_of_team_a(&namespaces);
    read().await.expect("authenticated with the first token");

    // A longer token, so that the file's size changes whatever its modification time says.
    server.rotate_token("rotated-s3cret-token");
    std::fs::write(&token_file, "rotated-s3cret-token\n").expect("rotate the token");
    let after = read().await;

    assert!(after.is_ok(), "the rotated token sent: {after:?}");
    assert_eq!(server.requests().len(), 2, "{:?}", server.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_token_file_of_only_whitespace_fails_naming_the_file_and_no_token_is_sent() {
    let server = ApiServer::start(TOKEN).await;
    let dir = tempfile::tempdir().expect("a directory");
    let (token_file, path) = kubeconfig_with_token_text(&server, dir.path(), " \n");

    let Err(error) = connect_by_kubeconfig(&path).await else {
        panic!("no token, yet a client was made");
    };

    assert!(
        matches!(&error, ClusterError::TokenFile { origin: "server.kubeconfig", path, .. } if *path == token_file),
        "{error}"
    );
    let text = dexaflow_admission::admission::error_chain(&error);
    assert_eq!(
        text,
        format!(
            "server.kubeconfig: tokenFile {}: holds no token",
            token_file.display()
        )
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_credential_plugin_that_never_answers_fails_the_start_naming_it_and_the_setting() {
    let server = ApiServer::start(TOKEN).await;
    let dir = tempfile::tempdir().expect("a directory");
    // Waits until the test's directory is gone, so that it outlives the test by an instant.
    let plugin = dir.path().join("plugin.sh");
    std::fs::write(&plugin, "while [ -e \"$0\" ]; do sleep 0.05; done\n").expect("write");
    let plugin_arg = plugin.display().to_string();
    let path = server.kubeconfig_with_exec(dir.path(), "/bin/sh", &[&plugin_arg]);

    let Err(error) = cluster::connect(
        Some((&path, "server.kubeconfig")),
        None,
        SHORT_REQUEST_TIMEOUT,
    )
    .await
    else {
        panic!("the plugin never answered, yet a client was made");
    };

    assert!(
        matches!(
            &error,
            ClusterError::ExecTimedOut { origin: "server.kubeconfig", command, after }
                if command == "/bin/sh" && *after == SHORT_REQUEST_TIMEOUT
        ),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "server.kubeconfig: the exec credential plugin \"/bin/sh\" has not answered within 300ms"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_that_does_not_parse_is_named_in_the_error() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, "clusters: [unclosed").expect("write");

    let error = refused_kubeconfig(&path, "not YAML").await;

    assert!(matches!(
        &error,
        ClusterError::Kubeconfig { origin: "server.kubeconfig", path: named, .. } if *named == path
    ));
    assert!(error.to_string().contains(&path.display().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfig_env_list_is_read_when_no_path_is_set() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("default", json!({"weight": 1}));
    let dir = tempfile::tempdir().expect("a directory");
    let path = server.kubeconfig(dir.path(), TOKEN);

    let client = cluster::connect(None, Some(path.into_os_string()), cluster::REQUEST_TIMEOUT)
        .await
        .expect("a client from KUBECONFIG");
    let (cache, _watching) = Cache::<Queue>::watch(client, QUEUES, Arc::new(Counted::default()));
    let synced = Arc::clone(&cache);
    eventually("the cache synced", move || {
        let done = synced.is_synced();
        async move { done.then_some(()) }
    })
    .await;

    assert!(cache.get("default").is_some());
}

/// The value of `KUBECONFIG` listing `entries` (empty ones included), joined as the platform
/// joins `PATH`.
fn kubeconfig_list(entries: &[&std::path::Path]) -> std::ffi::OsString {
    std::env::join_paths(entries).expect("paths without the separator")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_entries_and_missing_files_in_the_kubeconfig_env_list_are_skipped_as_kubectl_skips_them()
 {
    let server = ApiServer::start(TOKEN).await;
    server.put_team_a_in_research();
    let dir = tempfile::tempdir().expect("a directory");
    let path = server.kubeconfig(dir.path(), TOKEN);
    let missing = dir.path().join("absent.yaml");
    let empty = std::path::Path::new("");
    let list = kubeconfig_list(&[empty, &missing, empty, &path, empty]);

    let client = cluster::connect(None, Some(list), cluster::REQUEST_TIMEOUT)
        .await
        .expect("a client from the one file that exists");
    let queue = Namespaces::new(client)
        .annotation(
            "team-a",
            "scheduling.volcano.sh/queue-name",
            Instant::now() + Duration::from_secs(10),
        )
        .await
        .expect("read through the listed file's server");

    assert_eq!(queue.as_deref(), Some("research"));
    assert!(!missing.exists(), "nothing was made of the missing file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_env_list_of_no_existing_file_fails_naming_kubeconfig_and_the_list() {
    let dir = tempfile::tempdir().expect("a directory");
    let first = dir.path().join("a.yaml");
    let second = dir.path().join("b.yaml");
    let list = kubeconfig_list(&[&first, std::path::Path::new(""), &second]);

    let Err(error) = cluster::connect(None, Some(list.clone()), cluster::REQUEST_TIMEOUT).await
    else {
        panic!("no listed file exists, yet a client was made");
    };

    assert!(
        matches!(&error, ClusterError::NoneListed { list: named } if named.as_os_str() == list),
        "{error}"
    );
    let text = error.to_string();
    assert!(text.starts_with("KUBECONFIG: "), "{text}");
    assert!(
        text.contains(&list.to_string_lossy().into_owned()),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_kubeconfig_that_exists_but_does_not_parse_still_fails_naming_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "clusters: [unclosed").expect("write");
    let missing = dir.path().join("absent.yaml");

    let Err(error) = cluster::connect(
        None,
        Some(kubeconfig_list(&[&missing, &broken])),
        cluster::REQUEST_TIMEOUT,
    )
    .await
    else {
        panic!("not YAML, yet a client was made");
    };

    assert!(matches!(
        &error,
        ClusterError::Kubeconfig { origin: "KUBECONFIG", path, .. } if *path == broken
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubeconfig_file_is_named_in_the_error() {
    let path = std::path::PathBuf::from("/nonexistent/kubeconfig");

    let error = refused_kubeconfig(&path, "no such file").await;

    assert!(
        error.to_string().contains("/nonexistent/kubeconfig"),
        "{error}"
    );
}

/// An HTTP proxy on 127.0.0.1 that answers `CONNECT` only: it tunnels each connection to the
/// address the request names, and records that address; anything else is answered 405.
struct ConnectProxy {
    address: std::net::SocketAddr,
    tunnelled: Arc<std::sync::Mutex<Vec<String>>>,
    _accepting: tokio::task::JoinHandle<()>,
}

impl ConnectProxy {
    async fn start() -> ConnectProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let tunnelled = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = Arc::clone(&tunnelled);
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(ConnectProxy::tunnel(client, Arc::clone(&recorded)));
            }
        });
        ConnectProxy {
            address,
            tunnelled,
            _accepting: accepting,
        }
    }

    /// Reads the request's head, and for a `CONNECT` opens the tunnel and copies both ways.
    async fn tunnel(client: tokio::net::TcpStream, recorded: Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let mut client = BufReader::new(client);
        let mut request_line = String::new();
        let mut line = String::new();
        if client.read_line(&mut request_line).await.is_err() {
            return;
        }
        loop {
            line.clear();
            match client.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let mut words = request_line.split_whitespace();
        let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
            let _ = client
                .get_mut()
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                .await;
            return;
        };
        recorded.lock().expect("the record").push(target.to_owned());
        let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
            let _ = client
                .get_mut()
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                .await;
            return;
        };
        if client
            .get_mut()
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn tunnelled(&self) -> Vec<String> {
        self.tunnelled.lock().expect("the record").clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_s_proxy_url_carries_the_list_and_watch_through_the_proxy() {
    let server = ApiServer::start(TOKEN).await;
    server.put_queue("research", json!({"weight": 4}));
    let proxy = ConnectProxy::start().await;
    let dir = tempfile::tempdir().expect("a directory");
    let path = server.kubeconfig_through_proxy(dir.path(), TOKEN, &proxy.url());

    let client = cluster::connect(
        Some((&path, "server.kubeconfig")),
        None,
        cluster::REQUEST_TIMEOUT,
    )
    .await
    .expect("a client from a kubeconfig that names a proxy");
    let events = Arc::new(Counted::default());
    let (cache, _watching) = Cache::<Queue>::watch(client, QUEUES, events.clone());
    let synced = Arc::clone(&cache);
    eventually("the queue cache synced through the proxy", move || {
        let done = synced.is_synced();
        async move { done.then_some(()) }
    })
    .await;

    assert_eq!(cache.get("research").expect("listed").spec.weight, 4);
    let tunnelled = proxy.tunnelled();
    assert!(!tunnelled.is_empty(), "nothing went through the proxy");
    let api_server = server.address().to_string();
    assert!(
        tunnelled.iter().all(|target| *target == api_server),
        "tunnels to {tunnelled:?}, not only to the API server at {api_server}"
    );
    assert_eq!(events.failed.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socks5_proxy_url_fails_the_start_naming_it_without_its_credentials() {
    let server = ApiServer::start(TOKEN).await;
    let dir = tempfile::tempdir().expect("a directory");
    let path =
        server.kubeconfig_through_proxy(dir.path(), TOKEN, "socks5://admin:hunter2@127.0.0.1:1080");

    let error = refused_kubeconfig(&path, "a socks5 proxy").await;

    let message = error.to_string();
    assert_eq!(
        message,
        "server.kubeconfig: proxy-url socks5://127.0.0.1:1080: only an http:// or https:// proxy is supported"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}
