//! Kubernetes' `admission.k8s.io/v1` AdmissionReview, as the API server sends it and as it
//! reads the answer.
//!
//! Only v1 is accepted. The envelope's `apiVersion` and `kind` must be exactly
//! `admission.k8s.io/v1` and `AdmissionReview`; the request's fields are typed, and fields this
//! version does not know are ignored, as the API server's own decoder does, so that a newer
//! API server's additions never make every admission fail.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::registry::{Answer, Handler, Ruling, Unavailable};
use crate::admission::strict_from_str;

/// The only AdmissionReview version accepted, echoed in every answer.
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

/// An AdmissionReview the API server sent, its objects as `O`: their JSON text by default.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct Review<O = Box<RawValue>> {
    /// Always [`REVIEW_API_VERSION`].
    pub api_version: ReviewVersion,
    /// Always `AdmissionReview`.
    pub kind: ReviewKind,
    /// What is being admitted.
    pub request: ReviewRequest<O>,
}

/// The `apiVersion` of a review: only v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviewVersion {
    /// `admission.k8s.io/v1`.
    #[serde(rename = "admission.k8s.io/v1")]
    V1,
}

/// The `kind` of a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviewKind {
    /// `AdmissionReview`.
    AdmissionReview,
}

/// The request inside a review, its objects as `O`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct ReviewRequest<O = Box<RawValue>> {
    /// The id the answer must echo.
    pub uid: String,
    /// The object's kind, such as `{"group": "", "version": "v1", "kind": "Pod"}`.
    pub kind: GroupVersionKind,
    /// The resource the request is about, such as `{"group": "", "version": "v1", "resource":
    /// "pods"}`: what a webhook configuration's rules matched.
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// The object's name; empty when the API server has none yet (a CREATE with
    /// `generateName`). A DELETE names its object only here.
    #[serde(default)]
    pub name: String,
    /// The namespace the object is created in; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// Who asked.
    pub user_info: UserInfo,
    /// The object being admitted (absent on DELETE): its JSON text, or the service's own
    /// [`Object`], so that each service decodes it once, straight into the type it reads.
    #[serde(default = "none")]
    pub object: Option<O>,
    /// The object as it was before an UPDATE (absent on CREATE), as `object` is.
    #[serde(default = "none")]
    pub old_object: Option<O>,
}

// `#[serde(default)]` would ask `O: Default` of every object type.
fn none<O>() -> Option<O> {
    None
}

impl<O> Review<O> {
    fn map_objects<P>(self, map: impl FnMut(O) -> P) -> Review<P> {
        Review {
            api_version: self.api_version,
            kind: self.kind,
            request: self.request.map_objects(map),
        }
    }
}

impl<O> ReviewRequest<O> {
    fn map_objects<P>(self, mut map: impl FnMut(O) -> P) -> ReviewRequest<P> {
        ReviewRequest {
            object: self.object.map(&mut map),
            old_object: self.old_object.map(map),
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
        }
    }
}

/// How a service takes a review's objects: decoded with the envelope, in the same pass, when
/// they decode so; as their JSON text when they do not, so that the service answers why.
pub trait ReviewObject: DeserializeOwned + Send + Sync + 'static {
    /// The object whose text did not decode as the service's type.
    fn from_text(text: Box<RawValue>) -> Self;
}

impl ReviewObject for Box<RawValue> {
    fn from_text(text: Box<RawValue>) -> Self {
        text
    }
}

/// A review's object as a service of objects of type `T` takes it: decoded as `T` while the
/// envelope was read, or, when it is not a `T`, its text, which the service decodes again to
/// say why.
#[derive(Debug, Clone)]
pub enum Object<T> {
    /// Decoded as `T` with the envelope, boxed: the review holding it is moved through each
    /// layer of its decoding, and a pointer moves where a whole object would be copied.
    Decoded(Box<T>),
    /// The text of an object that did not decode as `T` (or whose review did not).
    Text(Box<RawValue>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|object| Object::Decoded(Box::new(object)))
    }
}

impl<T: Clone> Object<T> {
    /// The object as a `T`: the one decoded with the envelope, borrowed, or its text decoded
    /// again by `again`, which for an object that is not a `T` says why (`None` for a text of
    /// `null`). The service decides how the text is read and what its error says.
    ///
    /// # Errors
    /// `again`'s.
    pub fn or_decode<E>(
        &self,
        again: impl FnOnce(&RawValue) -> Result<Option<T>, E>,
    ) -> Result<Option<Cow<'_, T>>, E> {
        match self {
            Object::Decoded(object) => Ok(Some(Cow::Borrowed(object))),
            Object::Text(text) => Ok(again(text)?.map(Cow::Owned)),
        }
    }
}

impl<T: DeserializeOwned + Send + Sync + 'static> ReviewObject for Object<T> {
    fn from_text(text: Box<RawValue>) -> Self {
        Object::Text(text)
    }
}

/// `text` decoded as a review whose objects are `O`: in one pass when everything decodes so,
/// else with the objects kept as text (an envelope that does not decode is the error).
pub(super) fn decode_review<O: ReviewObject>(text: &str) -> Result<Review<O>, serde_json::Error> {
    strict_from_str::<Review<O>>(text)
        .or_else(|_| strict_from_str::<Review>(text).map(|review| review.map_objects(O::from_text)))
}

/// A group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GroupVersionKind {
    /// Empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Such as `v1`.
    pub version: String,
    /// Such as `Pod`.
    pub kind: String,
}

/// A group, version and resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupVersionResource {
    /// Empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Such as `v1`.
    #[serde(default)]
    pub version: String,
    /// The resource, plural, such as `pods`.
    #[serde(default)]
    pub resource: String,
}

/// The user a request comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct UserInfo {
    /// Such as `system:serviceaccount:dexaflow:dispatcher`.
    #[serde(default)]
    pub username: String,
}

/// An answer to a review.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewAnswer {
    /// The request's version, echoed.
    pub api_version: ReviewVersion,
    /// `AdmissionReview`.
    pub kind: ReviewKind,
    /// The answer.
    pub response: ReviewResponse,
}

/// The response inside an answer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewResponse {
    /// The request's uid, echoed.
    pub uid: String,
    /// Whether the object is admitted.
    pub allowed: bool,
    /// Why not, when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `JSONPatch`, only when there is a patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// The JSON Patch, base64, only when there is one: kept as the JSON string it is written
    /// as, since base64 needs no escaping and a patch is sent as it was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Box<RawValue>>,
}

/// The `status` of a refusal: Kubernetes' `metav1.Status`, as much of it as the API server shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    /// Shown to the user who made the request.
    pub message: String,
    /// `Forbidden` or `BadRequest`.
    pub reason: &'static str,
    /// 403 or 400.
    pub code: u16,
    /// Always empty.
    pub metadata: BTreeMap<String, String>,
    /// Always `Failure`.
    pub status: &'static str,
}

impl ReviewAnswer {
    /// Allowed, unchanged.
    pub fn allow<O>(request: &ReviewRequest<O>) -> ReviewAnswer {
        ReviewAnswer::new(request, true, None, None)
    }

    /// Allowed with `patch`, a JSON Patch document, sent base64 with its `patchType`; without
    /// operations it is a plain allow, with neither field.
    pub fn patch<O>(request: &ReviewRequest<O>, patch: &json_patch::Patch) -> ReviewAnswer {
        if patch.0.is_empty() {
            return ReviewAnswer::allow(request);
        }
        let json = serde_json::to_vec(patch).expect("a JSON Patch always serializes");
        ReviewAnswer::patch_text(request, &json)
    }

    /// Allowed with the JSON Patch document whose text is `json`, sent base64 with its
    /// `patchType`: for a service that writes its patch as text. `json` must hold at least
    /// one operation (an empty patch is [`ReviewAnswer::allow`]).
    pub fn patch_text<O>(request: &ReviewRequest<O>, json: &[u8]) -> ReviewAnswer {
        ReviewAnswer::encoded_patch(request, base64_string(json))
    }

    /// Allowed with a JSON Patch already in base64 as a JSON string ([`base64_string`]).
    pub(super) fn encoded_patch<O>(
        request: &ReviewRequest<O>,
        encoded: Box<RawValue>,
    ) -> ReviewAnswer {
        ReviewAnswer::new(request, true, None, Some(encoded))
    }

    /// Refused because of what the object is (403, `Forbidden`).
    pub fn forbid<O>(request: &ReviewRequest<O>, message: String) -> ReviewAnswer {
        let status = Status {
            message,
            reason: "Forbidden",
            code: 403,
            metadata: BTreeMap::new(),
            status: "Failure",
        };
        ReviewAnswer::new(request, false, Some(status), None)
    }

    /// Refused because the review is not one this service answers (400, `BadRequest`).
    pub fn bad_request<O>(request: &ReviewRequest<O>, message: String) -> ReviewAnswer {
        let status = Status {
            message,
            reason: "BadRequest",
            code: 400,
            metadata: BTreeMap::new(),
            status: "Failure",
        };
        ReviewAnswer::new(request, false, Some(status), None)
    }

    fn new<O>(
        request: &ReviewRequest<O>,
        allowed: bool,
        status: Option<Status>,
        patch: Option<Box<RawValue>>,
    ) -> ReviewAnswer {
        ReviewAnswer {
            api_version: ReviewVersion::V1,
            kind: ReviewKind::AdmissionReview,
            response: ReviewResponse {
                uid: request.uid.clone(),
                allowed,
                status,
                patch_type: patch.as_ref().map(|_| "JSONPatch"),
                patch,
            },
        }
    }

    /// Whether the answer carries a patch.
    pub fn is_patched(&self) -> bool {
        self.response.patch.is_some()
    }

    /// The answer, with how the metrics count it.
    fn ruled(self) -> Answer<ReviewAnswer> {
        let ruling = match (self.response.allowed, self.is_patched()) {
            (false, _) => Ruling::Denied,
            (true, true) => Ruling::Patched,
            (true, false) => Ruling::Allowed,
        };
        Answer { ruling, body: self }
    }
}

/// `json` in base64 as the JSON string an answer carries its patch in.
pub(super) fn base64_string(json: &[u8]) -> Box<RawValue> {
    let mut quoted = String::with_capacity(json.len().div_ceil(3) * 4 + 2);
    quoted.push('"');
    base64::engine::general_purpose::STANDARD.encode_string(json, &mut quoted);
    quoted.push('"');
    RawValue::from_string(quoted).expect("base64 in quotes is a JSON string")
}

/// A service that answers AdmissionReviews at once, without waiting on anything: every such
/// service is a [`Handler`] of reviews.
pub trait Reviewer: Send + Sync + 'static {
    /// How the service takes the review's objects: their text, or its own [`Object`].
    type Object: ReviewObject;

    /// The answer to `request`.
    fn review(&self, request: &ReviewRequest<Self::Object>) -> ReviewAnswer;
}

/// A service that answers AdmissionReviews, and may first wait on something (the cluster)
/// within the request's deadline. Every [`Reviewer`] is one; every one is a [`Handler`].
pub trait WaitingReviewer: Send + Sync + 'static {
    /// How the service takes the review's objects: their text, or its own [`Object`].
    type Object: ReviewObject;

    /// The answer to `request`, or [`Unavailable`] when the service cannot decide now.
    ///
    /// # Errors
    /// [`Unavailable`] when what the answer needs cannot be had before `deadline`.
    fn review_by(
        &self,
        request: &ReviewRequest<Self::Object>,
        deadline: Instant,
    ) -> impl Future<Output = Result<ReviewAnswer, Unavailable>> + Send;
}

impl<R: Reviewer> WaitingReviewer for R {
    type Object = R::Object;

    async fn review_by(
        &self,
        request: &ReviewRequest<R::Object>,
        _deadline: Instant,
    ) -> Result<ReviewAnswer, Unavailable> {
        Ok(self.review(request))
    }
}

impl<R: WaitingReviewer> Handler for R {
    type Request = Review<R::Object>;
    type Response = ReviewAnswer;

    fn decode(text: &str) -> Result<Self::Request, serde_json::Error> {
        decode_review(text)
    }

    /// The path within the envelope: its error is what `decode_review` reports, since an
    /// object that is not the service's type is the service's to judge.
    fn explain(text: &str, error: serde_json::Error) -> String {
        super::registry::located::<Review>(text, error)
    }

    fn uid(review: &Self::Request) -> &str {
        &review.request.uid
    }

    async fn handle(
        &self,
        review: Self::Request,
        deadline: Instant,
    ) -> Result<Answer<ReviewAnswer>, Unavailable> {
        Ok(self.review_by(&review.request, deadline).await?.ruled())
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::{Object, Review, ReviewRequest, decode_review};

    fn request(objects: &str) -> ReviewRequest {
        serde_json::from_str(&format!(
            r#"{{"uid": "1", "kind": {{"group": "", "version": "v1", "kind": "Pod"}}, "operation": "UPDATE", "userInfo": {{}}, {objects}}}"#
        ))
        .expect("a review request")
    }

    #[test]
    fn a_null_or_absent_object_is_none_and_a_present_one_keeps_its_text() {
        let null = request(r#""object": {"metadata": {"name": "p"}}, "oldObject": null"#);
        let absent = request(r#""object": {"metadata": {"name": "p"}}"#);

        assert!(null.old_object.is_none());
        assert!(absent.old_object.is_none());
        assert_eq!(
            null.object.as_deref().map(|text| text.get()),
            Some(r#"{"metadata": {"name": "p"}}"#)
        );
    }

    fn review(objects: &str) -> String {
        format!(
            r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{"uid": "1", "kind": {{"group": "", "version": "v1", "kind": "Pod"}}, "operation": "UPDATE", "userInfo": {{}}, {objects}}}}}"#
        )
    }

    #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
    struct Named {
        name: String,
    }

    #[test]
    fn objects_that_decode_as_the_service_type_are_decoded_with_the_envelope() {
        let text = review(r#""object": {"name": "new"}, "oldObject": {"name": "old"}"#);

        let decoded: Review<Object<Named>> = decode_review(&text).expect("a review");

        assert!(
            matches!(&decoded.request.object, Some(Object::Decoded(named)) if named.name == "new")
        );
        assert!(
            matches!(&decoded.request.old_object, Some(Object::Decoded(named)) if named.name == "old")
        );
    }

    #[test]
    fn when_one_object_does_not_decode_both_keep_their_text() {
        let text = review(r#""object": {"name": "new"}, "oldObject": {"name": 7}"#);

        let decoded: Review<Object<Named>> = decode_review(&text).expect("a review");

        assert!(
            matches!(&decoded.request.object, Some(Object::Text(text)) if text.get() == r#"{"name": "new"}"#)
        );
        assert!(
            matches!(&decoded.request.old_object, Some(Object::Text(text)) if text.get() == r#"{"name": 7}"#)
        );
    }

    #[test]
    fn a_decoded_object_is_lent_as_it_is_and_its_text_is_never_read_again() {
        let object = Object::Decoded(Box::new(Named {
            name: "new".to_owned(),
        }));

        let taken = object.or_decode(|_| -> Result<Option<Named>, ()> {
            panic!("the text of a decoded object is read again")
        });

        assert!(matches!(taken, Ok(Some(Cow::Borrowed(named))) if named.name == "new"));
    }

    #[test]
    fn an_object_kept_as_text_is_decoded_again_by_the_services_own_decoder() {
        let text =
            serde_json::value::to_raw_value(&serde_json::json!({"name": 7})).expect("JSON text");
        let object = Object::<Named>::Text(text);

        let taken = object.or_decode(|text| {
            serde_json::from_str::<Named>(text.get())
                .map(Some)
                .map_err(|error| format!("not a name: {error}"))
        });

        let error = taken.expect_err("7 is no name");
        assert!(error.starts_with("not a name: invalid type"), "{error}");
    }

    #[test]
    fn an_envelope_that_does_not_decode_is_the_error_whatever_its_objects() {
        let text = review(r#""object": {"name": "new"}"#).replace(r#""uid": "1""#, r#""uid": 1"#);

        let error = decode_review::<Object<Named>>(&text).expect_err("no uid string");

        assert!(
            error.to_string().starts_with("invalid type: integer `1`"),
            "{error}"
        );
    }
}
