//! RFC 3161 replies read from their DER, field by field.
//!
//! A `TimeStampResp` holds a `PKIStatusInfo` and, when granted, a
//! `TimeStampToken`: a CMS `ContentInfo` whose `SignedData` encapsulates
//! the DER of a `TSTInfo` (id-ct-TSTInfo). Only the `TSTInfo` is covered by
//! the authority's signature; the status's free text is not, so nothing is
//! read from text: the status is its integer, every other field comes from
//! the `TSTInfo` inside the signed data. The signature and the chain are
//! verified by `openssl ts -verify` on the same bytes
//! ([`super::openssl::verify`]).
//!
//! The structures come from RustCrypto's `cms` and `x509-cert`; `TSTInfo`
//! and the request are declared here with `der`'s derive macros because
//! `der` 0.7's `GeneralizedTime` refuses fractional seconds, which
//! authorities put in `genTime` (RFC 3161 §2.4.2).

use super::TsaError;
use chrono::{DateTime, NaiveDate, Utc};
use cms::cert::CertificateChoices;
use cms::cert::x509::Certificate;
use cms::cert::x509::ext::Extensions;
use cms::cert::x509::ext::pkix::name::GeneralName;
use cms::cert::x509::ext::pkix::{SubjectAltName, SubjectKeyIdentifier};
use cms::cert::x509::name::Name;
use cms::cert::x509::spki::AlgorithmIdentifierOwned;
use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier};
use der::asn1::{Any, BitString, Int, ObjectIdentifier, OctetString, Uint};
use der::{
    Decode, DecodeValue, Encode, EncodeValue, FixedTag, Header, Length, Reader, Sequence, Tag,
    Tagged, Writer,
};
use std::path::Path;

/// The most bytes a time-stamp reply file may have. Replies are a few
/// kilobytes (a token and the authority's certificate chain); the cap
/// keeps a hostile package from making the reader hold a large file.
pub const MAX_REPLY_BYTES: u64 = 1 << 20;

/// The most a token's stated accuracy counts for, in ms (about 30 years).
pub const MAX_ACCURACY_MS: u64 = 1_000_000_000_000;

/// id-signedData (RFC 5652).
const ID_SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
/// id-ct-TSTInfo (RFC 3161).
const ID_CT_TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");
/// id-sha256 (RFC 5754).
pub const ID_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const ID_SUBJECT_KEY_IDENTIFIER: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");
const ID_SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");

/// ```text
/// PKIStatusInfo ::= SEQUENCE {
///     status        PKIStatus,            -- INTEGER
///     statusString  PKIFreeText OPTIONAL, -- SEQUENCE OF UTF8String
///     failInfo      PKIFailureInfo OPTIONAL }
/// ```
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct PkiStatusInfo {
    status: u32,
    #[asn1(optional = "true")]
    status_string: Option<Vec<String>>,
    #[asn1(optional = "true")]
    fail_info: Option<BitString>,
}

/// ```text
/// TimeStampResp ::= SEQUENCE {
///     status          PKIStatusInfo,
///     timeStampToken  TimeStampToken OPTIONAL }
/// ```
/// The token is kept as it was encoded: its bytes are what a seed is
/// derived from.
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct TimeStampResp {
    status: PkiStatusInfo,
    #[asn1(optional = "true")]
    time_stamp_token: Option<Any>,
}

/// ```text
/// MessageImprint ::= SEQUENCE {
///     hashAlgorithm  AlgorithmIdentifier,
///     hashedMessage  OCTET STRING }
/// ```
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct MessageImprint {
    hash_algorithm: AlgorithmIdentifierOwned,
    hashed_message: OctetString,
}

/// ```text
/// Accuracy ::= SEQUENCE {
///     seconds      INTEGER OPTIONAL,
///     millis   [0] INTEGER (1..999) OPTIONAL,
///     micros   [1] INTEGER (1..999) OPTIONAL }
/// ```
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct Accuracy {
    #[asn1(optional = "true")]
    seconds: Option<u64>,
    #[asn1(context_specific = "0", tag_mode = "IMPLICIT", optional = "true")]
    millis: Option<u16>,
    #[asn1(context_specific = "1", tag_mode = "IMPLICIT", optional = "true")]
    micros: Option<u16>,
}

/// A `GeneralizedTime` as encoded (`YYYYMMDDHHMMSS[.f…]Z`), fractional
/// seconds allowed.
#[derive(Clone, Debug, Eq, PartialEq)]
struct GenTime(Vec<u8>);

impl FixedTag for GenTime {
    const TAG: Tag = Tag::GeneralizedTime;
}

impl<'a> DecodeValue<'a> for GenTime {
    fn decode_value<R: Reader<'a>>(reader: &mut R, header: Header) -> der::Result<Self> {
        // 14 digits, a point, nanoseconds and more, `Z`: anything longer
        // is not a time.
        if usize::try_from(header.length)? > 64 {
            return Err(Self::TAG.length_error());
        }
        Ok(GenTime(reader.read_vec(header.length)?))
    }
}

impl EncodeValue for GenTime {
    fn value_len(&self) -> der::Result<Length> {
        Length::try_from(self.0.len())
    }
    fn encode_value(&self, writer: &mut impl Writer) -> der::Result<()> {
        writer.write(&self.0)
    }
}

impl GenTime {
    /// The time, and whether it carries a fraction of a second. DER's
    /// form only: UTC (`Z`), a point before the fraction.
    fn parse(&self) -> Option<(DateTime<Utc>, bool)> {
        let s = std::str::from_utf8(&self.0).ok()?;
        let body = s.strip_suffix('Z')?;
        let (whole, frac) = match body.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (body, None),
        };
        if whole.len() != 14 || !whole.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = |r: std::ops::Range<usize>| whole[r].parse::<u32>().ok();
        let date = NaiveDate::from_ymd_opt(n(0..4)? as i32, n(4..6)?, n(6..8)?)?;
        let mut nanos = 0u32;
        if let Some(f) = frac {
            if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Digits past nanoseconds are dropped (the time rounds down).
            let digits: String = f.chars().chain(std::iter::repeat('0')).take(9).collect();
            nanos = digits.parse().ok()?;
        }
        let t = date.and_hms_nano_opt(n(8..10)?, n(10..12)?, n(12..14)?, nanos)?;
        Some((t.and_utc(), frac.is_some()))
    }
}

/// ```text
/// TSTInfo ::= SEQUENCE {
///     version         INTEGER { v1(1) },
///     policy          TSAPolicyId,
///     messageImprint  MessageImprint,
///     serialNumber    INTEGER,
///     genTime         GeneralizedTime,
///     accuracy        Accuracy OPTIONAL,
///     ordering        BOOLEAN DEFAULT FALSE,
///     nonce           INTEGER OPTIONAL,
///     tsa         [0] GeneralName OPTIONAL,
///     extensions  [1] IMPLICIT Extensions OPTIONAL }
/// ```
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct TstInfo {
    version: u8,
    policy: ObjectIdentifier,
    message_imprint: MessageImprint,
    serial_number: Int,
    gen_time: GenTime,
    #[asn1(optional = "true")]
    accuracy: Option<Accuracy>,
    #[asn1(default = "Default::default")]
    ordering: bool,
    #[asn1(optional = "true")]
    nonce: Option<Int>,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    tsa: Option<GeneralName>,
    #[asn1(context_specific = "1", tag_mode = "IMPLICIT", optional = "true")]
    extensions: Option<Extensions>,
}

/// ```text
/// TimeStampReq ::= SEQUENCE {
///     version         INTEGER { v1(1) },
///     messageImprint  MessageImprint,
///     reqPolicy       TSAPolicyId OPTIONAL,
///     nonce           INTEGER OPTIONAL,
///     certReq         BOOLEAN DEFAULT FALSE,
///     extensions  [0] IMPLICIT Extensions OPTIONAL }
/// ```
/// (referee sends neither a policy nor extensions.)
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct TimeStampReq {
    version: u8,
    message_imprint: MessageImprint,
    nonce: Uint,
    #[asn1(default = "Default::default")]
    cert_req: bool,
}

/// A DER time-stamp request over the sha256 `digest` with the random
/// 64-bit `nonce`, asking for the authority's certificate in the token;
/// and the nonce as [`TokenInfo::nonce`] shows it.
pub fn request(digest: &[u8; 32], nonce: [u8; 8]) -> (Vec<u8>, String) {
    let nonce = Uint::new(&nonce).expect("8 bytes are an unsigned integer");
    let req = TimeStampReq {
        version: 1,
        message_imprint: MessageImprint {
            // sha256 with NULL parameters, as `openssl ts -query` writes it.
            hash_algorithm: AlgorithmIdentifierOwned {
                oid: ID_SHA256,
                parameters: Some(Any::null()),
            },
            hashed_message: OctetString::new(digest.to_vec()).expect("32 bytes"),
        },
        nonce: nonce.clone(),
        cert_req: true,
    };
    let shown = integer_text(nonce.as_bytes(), false);
    (req.to_der().expect("a request encodes"), shown)
}

/// `PKIStatus` (RFC 3161 §2.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub u32);

impl Status {
    /// `granted` (0) or `grantedWithMods` (1): a token is there.
    pub fn granted(self) -> bool {
        self.0 <= 1
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            0 => "granted",
            1 => "granted with modifications",
            2 => "rejection",
            3 => "waiting",
            4 => "revocation warning",
            5 => "revocation notification",
            _ => "unknown status",
        };
        write!(f, "{name} (PKIStatus {})", self.0)
    }
}

/// A reply read from its DER.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: Status,
    /// The status's free text: unsigned, for the run's own error messages
    /// only (escaped), never a source of fields.
    pub status_text: Vec<String>,
    /// The token, when one is granted.
    pub token: Option<TokenInfo>,
}

impl Reply {
    /// The status and its free text, escaped, for an error message.
    pub fn status_line(&self) -> String {
        let mut s = self.status.to_string();
        if !self.status_text.is_empty() {
            s.push_str(": ");
            s.push_str(&escape(&self.status_text.join(" / ")));
        }
        s
    }
}

/// What a granted token says: the fields of its `TSTInfo`, the signed part.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenInfo {
    pub version: u8,
    /// The policy's OID, dotted.
    pub policy: String,
    /// `sha256`, or the OID of another algorithm, dotted.
    pub hash_algorithm: String,
    pub imprint: Vec<u8>,
    /// As `openssl ts` prints integers: `0x` and uppercase hex bytes.
    pub serial: String,
    /// The token's time (`genTime`).
    pub gen_time: DateTime<Utc>,
    /// Whether `genTime` has a fraction of a second (without one, the time
    /// may have been cut from anywhere in its second).
    pub gen_time_fraction: bool,
    /// Its stated accuracy in ms, rounded up (0 when absent).
    pub accuracy_ms: u64,
    pub ordering: bool,
    /// `0x…`, or `None` when the token has none.
    pub nonce: Option<String>,
    /// The `tsa` field: a directory name as `/CN=…` (openssl's one-line
    /// form), another kind of name with its kind (`DNS:…`); `None` when
    /// absent.
    pub tsa: Option<String>,
    /// The subject of the certificate that signed the token, when the token
    /// carries it.
    pub signer: Option<String>,
    /// `Some(false)` when the `tsa` field names neither the signer
    /// certificate's subject nor one of its alternative names (RFC 3161
    /// §2.4.2 requires one of them); `None` when not checkable.
    pub tsa_is_signer: Option<bool>,
    /// The `TimeStampToken` (DER `ContentInfo`) as it lies in the reply.
    pub token_der: Vec<u8>,
}

impl TokenInfo {
    /// The authority as people read it: its name in the token, else its
    /// signer certificate's subject (what `openssl ts -verify` chains to
    /// the CA), else `url` (escaped: a record's text).
    pub fn name(&self, url: &str) -> String {
        self.tsa
            .clone()
            .or_else(|| self.signer.clone())
            .unwrap_or_else(|| escape(url))
    }

    /// The `tsa` field as `openssl ts -text` prints it.
    pub fn tsa_text(&self) -> String {
        match &self.tsa {
            Some(n) if n.starts_with('/') => format!("DirName:{n}"),
            Some(n) => n.clone(),
            None => "unspecified".into(),
        }
    }
}

/// Read a reply file: a regular file (a link is not followed), at most
/// [`MAX_REPLY_BYTES`]. Returns its bytes.
pub fn read_file(path: &Path) -> Result<Vec<u8>, TsaError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Not a link; and a FIFO opens without waiting for a writer (then
        // fails the type check below).
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => TsaError::NotRegularFile {
                path: path.to_path_buf(),
                found: "a symbolic link",
            },
            _ => TsaError::Io {
                path: path.to_path_buf(),
                source: e,
            },
        })?;
    let meta = file.metadata().map_err(TsaError::io(path))?;
    let ty = meta.file_type();
    if !ty.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let found = if ty.is_dir() {
            "a directory"
        } else if ty.is_fifo() {
            "a FIFO"
        } else if ty.is_socket() {
            "a socket"
        } else if ty.is_block_device() || ty.is_char_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(TsaError::NotRegularFile {
            path: path.to_path_buf(),
            found,
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_REPLY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(TsaError::io(path))?;
    if bytes.len() as u64 > MAX_REPLY_BYTES {
        return Err(TsaError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_REPLY_BYTES,
        });
    }
    Ok(bytes)
}

/// Read a reply's fields from its DER `bytes`; `origin` (the file, or the
/// authority that sent it) names it in errors.
pub fn parse(bytes: &[u8], origin: &str) -> Result<Reply, TsaError> {
    let der = |expected: &'static str| {
        let origin = origin.to_string();
        move |source: der::Error| TsaError::Der {
            origin,
            expected,
            source,
        }
    };
    let bad = |expected: &'static str, found: String| TsaError::Malformed {
        origin: origin.to_string(),
        expected,
        found,
    };
    let resp = TimeStampResp::from_der(bytes).map_err(der("a TimeStampResp"))?;
    let status = Status(resp.status.status);
    let status_text = resp.status.status_string.clone().unwrap_or_default();
    let Some(token) = resp.time_stamp_token else {
        if status.granted() {
            return Err(bad("a TimeStampToken in a granted reply", "none".into()));
        }
        return Ok(Reply {
            status,
            status_text,
            token: None,
        });
    };
    if !status.granted() {
        // Not granted: the token is not read (RFC 3161 §2.4.2: present
        // only when granted).
        return Ok(Reply {
            status,
            status_text,
            token: None,
        });
    }
    let token_der = token.to_der().map_err(der("a TimeStampToken"))?;
    let ci = ContentInfo::from_der(&token_der).map_err(der("a CMS ContentInfo"))?;
    if ci.content_type != ID_SIGNED_DATA {
        return Err(bad(
            "a ContentInfo of type id-signedData (1.2.840.113549.1.7.2)",
            ci.content_type.to_string(),
        ));
    }
    let sd_der = ci.content.to_der().map_err(der("a CMS SignedData"))?;
    let sd = SignedData::from_der(&sd_der).map_err(der("a CMS SignedData"))?;
    let encap = &sd.encap_content_info;
    if encap.econtent_type != ID_CT_TST_INFO {
        return Err(bad(
            "encapsulated content of type id-ct-TSTInfo (1.2.840.113549.1.9.16.1.4)",
            encap.econtent_type.to_string(),
        ));
    }
    let econtent = encap
        .econtent
        .as_ref()
        .ok_or_else(|| bad("encapsulated TSTInfo content", "none".into()))?;
    if econtent.tag() != Tag::OctetString {
        return Err(bad(
            "the TSTInfo in an OCTET STRING",
            econtent.tag().to_string(),
        ));
    }
    let tst = TstInfo::from_der(econtent.value()).map_err(der("a TSTInfo"))?;
    if tst.version != 1 {
        return Err(bad("TSTInfo version 1", tst.version.to_string()));
    }
    let (gen_time, gen_time_fraction) = tst.gen_time.parse().ok_or_else(|| {
        bad(
            "genTime as YYYYMMDDHHMMSS[.fff]Z",
            escape(&String::from_utf8_lossy(&tst.gen_time.0)),
        )
    })?;
    let accuracy_ms = match &tst.accuracy {
        None => 0,
        Some(a) => {
            let (ms, us) = (a.millis.unwrap_or(0), a.micros.unwrap_or(0));
            if ms > 999 || us > 999 {
                return Err(bad(
                    "accuracy millis and micros of 1 to 999",
                    format!("{ms} millis, {us} micros"),
                ));
            }
            let micros = a
                .seconds
                .unwrap_or(0)
                .saturating_mul(1_000_000)
                .saturating_add(u64::from(ms) * 1_000 + u64::from(us));
            // An accuracy of more than 30 years says nothing a smaller one
            // would not; the bound keeps every time computed from it in
            // range.
            micros.div_ceil(1_000).min(MAX_ACCURACY_MS)
        }
    };
    let alg = &tst.message_imprint.hash_algorithm.oid;
    let hash_algorithm = if *alg == ID_SHA256 {
        "sha256".to_string()
    } else {
        alg.to_string()
    };
    let signer = signer_certificate(&sd);
    let tsa = tst.tsa.as_ref().map(general_name_text);
    let tsa_is_signer = match (&tst.tsa, signer) {
        (Some(name), Some(cert)) => Some(names_certificate(name, cert)),
        _ => None,
    };
    Ok(Reply {
        status,
        status_text,
        token: Some(TokenInfo {
            version: tst.version,
            policy: tst.policy.to_string(),
            hash_algorithm,
            imprint: tst.message_imprint.hashed_message.as_bytes().to_vec(),
            serial: integer_text(tst.serial_number.as_bytes(), true),
            gen_time,
            gen_time_fraction,
            accuracy_ms,
            ordering: tst.ordering,
            nonce: tst.nonce.as_ref().map(|n| integer_text(n.as_bytes(), true)),
            tsa,
            signer: signer.map(|c| name_text(&c.tbs_certificate.subject)),
            tsa_is_signer,
            token_der,
        }),
    })
}

/// Read a reply file ([`read_file`]) and its fields ([`parse`]); the
/// bytes are returned with them, for verifying exactly what was read.
pub fn read(path: &Path) -> Result<(Vec<u8>, Reply), TsaError> {
    let bytes = read_file(path)?;
    let reply = parse(&bytes, &path.display().to_string())?;
    Ok((bytes, reply))
}

/// The certificate among the token's that its (first) signer names.
fn signer_certificate(sd: &SignedData) -> Option<&Certificate> {
    let si = sd.signer_infos.0.iter().next()?;
    let certs = sd.certificates.as_ref()?.0.iter().filter_map(|c| match c {
        CertificateChoices::Certificate(c) => Some(c),
        CertificateChoices::Other(_) => None,
    });
    let mut certs = certs;
    match &si.sid {
        SignerIdentifier::IssuerAndSerialNumber(is) => certs.find(|c| {
            c.tbs_certificate.issuer == is.issuer
                && c.tbs_certificate.serial_number == is.serial_number
        }),
        SignerIdentifier::SubjectKeyIdentifier(ski) => certs.find(|c| {
            extension(c, ID_SUBJECT_KEY_IDENTIFIER)
                .and_then(|v| SubjectKeyIdentifier::from_der(v).ok())
                .is_some_and(|k| k == *ski)
        }),
    }
}

/// The DER value of a certificate's extension `oid`.
fn extension(cert: &Certificate, oid: ObjectIdentifier) -> Option<&[u8]> {
    cert.tbs_certificate
        .extensions
        .as_ref()?
        .iter()
        .find(|e| e.extn_id == oid)
        .map(|e| e.extn_value.as_bytes())
}

/// Is `name` the certificate's subject or one of its alternative names?
fn names_certificate(name: &GeneralName, cert: &Certificate) -> bool {
    if let GeneralName::DirectoryName(n) = name
        && *n == cert.tbs_certificate.subject
    {
        return true;
    }
    extension(cert, ID_SUBJECT_ALT_NAME)
        .and_then(|v| SubjectAltName::from_der(v).ok())
        .is_some_and(|san| san.0.iter().any(|g| g == name))
}

/// An integer as `openssl ts -text` prints it: `0x` and the big-endian
/// bytes of its magnitude in uppercase hex (`0x0` for zero; a negative one
/// `0x-…`). `signed`: `bytes` are two's complement (else unsigned).
fn integer_text(bytes: &[u8], signed: bool) -> String {
    let negative = signed && bytes.first().is_some_and(|b| b & 0x80 != 0);
    let magnitude: Vec<u8> = if negative {
        // Two's complement: invert and add one.
        let mut m: Vec<u8> = bytes.iter().map(|b| !b).collect();
        for b in m.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        }
        m
    } else {
        bytes.to_vec()
    };
    let start = magnitude.iter().position(|b| *b != 0);
    let hex = match start {
        Some(i) => hex::encode_upper(&magnitude[i..]),
        None => "0".into(),
    };
    format!("0x{}{hex}", if negative { "-" } else { "" })
}

/// A `GeneralName` as openssl prints it (`DirName:` left out).
fn general_name_text(g: &GeneralName) -> String {
    match g {
        GeneralName::DirectoryName(n) => name_text(n),
        GeneralName::Rfc822Name(s) => format!("email:{}", escape_bytes(s.as_str().as_bytes())),
        GeneralName::DnsName(s) => format!("DNS:{}", escape_bytes(s.as_str().as_bytes())),
        GeneralName::UniformResourceIdentifier(s) => {
            format!("URI:{}", escape_bytes(s.as_str().as_bytes()))
        }
        GeneralName::IpAddress(b) => format!("IP Address:{}", hex::encode(b.as_bytes())),
        GeneralName::RegisteredId(o) => format!("Registered ID:{o}"),
        GeneralName::OtherName(_) => "othername:<unsupported>".into(),
        GeneralName::EdiPartyName(_) => "EdiPartyName:<unsupported>".into(),
    }
}

/// Short names of the attributes openssl abbreviates in a one-line name.
fn attribute_name(oid: &ObjectIdentifier) -> String {
    const SHORT: [(&str, &str); 16] = [
        ("2.5.4.3", "CN"),
        ("2.5.4.4", "SN"),
        ("2.5.4.5", "serialNumber"),
        ("2.5.4.6", "C"),
        ("2.5.4.7", "L"),
        ("2.5.4.8", "ST"),
        ("2.5.4.9", "street"),
        ("2.5.4.10", "O"),
        ("2.5.4.11", "OU"),
        ("2.5.4.12", "title"),
        ("2.5.4.42", "GN"),
        ("2.5.4.97", "organizationIdentifier"),
        ("2.5.4.17", "postalCode"),
        ("1.2.840.113549.1.9.1", "emailAddress"),
        ("0.9.2342.19200300.100.1.25", "DC"),
        ("0.9.2342.19200300.100.1.1", "UID"),
    ];
    let dotted = oid.to_string();
    SHORT
        .iter()
        .find(|(o, _)| *o == dotted)
        .map_or(dotted, |(_, n)| n.to_string())
}

/// A directory name in openssl's one-line form (`/C=US/O=Example/CN=TSA`,
/// in the order encoded), bytes outside printable ASCII as `\xHH`.
fn name_text(name: &Name) -> String {
    let mut out = String::new();
    for rdn in name.0.iter() {
        for (k, atv) in rdn.0.iter().enumerate() {
            out.push(if k == 0 { '/' } else { '+' });
            out.push_str(&attribute_name(&atv.oid));
            out.push('=');
            out.push_str(&value_text(&atv.value));
        }
    }
    out
}

/// An attribute's value: its characters for the string types, else `#`
/// and the hex of its DER.
fn value_text(v: &Any) -> String {
    match v.tag() {
        Tag::Utf8String
        | Tag::PrintableString
        | Tag::Ia5String
        | Tag::TeletexString
        | Tag::VisibleString => escape_bytes(v.value()),
        Tag::BmpString => {
            let units = v
                .value()
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            let s: String = char::decode_utf16(units)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect();
            escape_bytes(s.as_bytes())
        }
        _ => format!("#{}", hex::encode(v.to_der().unwrap_or_default())),
    }
}

/// Bytes outside printable ASCII (and `\`) as `\xHH`, as openssl's
/// one-line names show them: no control character or bidirectional
/// override from a token reaches a terminal.
fn escape_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            out.push(c as char);
        } else {
            out.push_str(&format!("\\x{c:02X}"));
        }
    }
    out
}

/// Text from outside (an authority's status text, `openssl`'s messages)
/// with every control character escaped.
pub fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control()
                || ('\u{202A}'..='\u{202E}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
            {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::OnceLock;

    fn openssl(dir: &Path, args: &[&str]) -> String {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// A test authority in a directory of its own: a self-signed TSA
    /// certificate (EC, extendedKeyUsage critical timeStamping) and
    /// openssl's TSA configuration, stating an accuracy in seconds, millis
    /// and micros and genTime to the millisecond.
    pub(crate) fn authority() -> &'static Path {
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap().keep();
            openssl(
                &dir,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-keyout",
                    "tsa.key",
                    "-out",
                    "tsa.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/C=DE/O=Unit Test Org/CN=Unit TSA",
                    "-addext",
                    "extendedKeyUsage=critical,timeStamping",
                ],
            );
            std::fs::write(dir.join("tsaserial"), "01\n").unwrap();
            std::fs::write(
                dir.join("tsa.cnf"),
                format!(
                    "[ tsa ]\ndefault_tsa = tsa_config1\n[ tsa_config1 ]\ndir = {}\n\
                     serial = $dir/tsaserial\nsigner_cert = $dir/tsa.pem\n\
                     signer_key = $dir/tsa.key\nsigner_digest = sha256\n\
                     default_policy = 1.2.3.4.99\ndigests = sha256\n\
                     accuracy = secs:1, millisecs:500, microsecs:100\n\
                     clock_precision_digits = 3\nordering = yes\ntsa_name = yes\n\
                     ess_cert_id_alg = sha256\n",
                    dir.display()
                ),
            )
            .unwrap();
            dir
        })
    }

    /// A reply of the test authority to referee's own request over
    /// `digest` with `nonce`, written to `name` in the authority's
    /// directory. → (its path, its bytes).
    pub(crate) fn reply(digest: &[u8; 32], nonce: [u8; 8], name: &str) -> (PathBuf, Vec<u8>) {
        // One reply at a time: the serial file is read and written.
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = authority();
        let (query, _) = request(digest, nonce);
        let q = dir.join(format!("{name}.tsq"));
        std::fs::write(&q, query).unwrap();
        let r = dir.join(name);
        openssl(
            dir,
            &[
                "ts",
                "-reply",
                "-config",
                "tsa.cnf",
                "-queryfile",
                q.to_str().unwrap(),
                "-out",
                r.to_str().unwrap(),
            ],
        );
        let bytes = std::fs::read(&r).unwrap();
        (r, bytes)
    }

    /// The value after `label` on the first line that starts with it.
    fn field<'a>(text: &'a str, label: &str) -> &'a str {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(label))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {label} in {text}"))
    }

    /// openssl's `Dec  7 21:00:00.123 2026 GMT`.
    fn openssl_time(s: &str) -> DateTime<Utc> {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        chrono::NaiveDateTime::parse_from_str(&s, "%b %d %H:%M:%S%.f %Y GMT")
            .unwrap()
            .and_utc()
    }

    /// openssl's `0x01 seconds, 0x01F4 millis, 0x64 micros` in ms, rounded up.
    fn openssl_accuracy_ms(s: &str) -> u64 {
        let mut micros = 0;
        for part in s.split(',') {
            let mut w = part.split_whitespace();
            let (v, unit) = (w.next().unwrap(), w.next().unwrap());
            let v = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).unwrap(),
                None => 0,
            };
            micros += v * match unit {
                "seconds" => 1_000_000,
                "millis" => 1_000,
                _ => 1,
            };
        }
        micros.div_ceil(1_000)
    }

    /// The hex dump after `Message data:`.
    fn openssl_imprint(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for l in text
            .lines()
            .skip_while(|l| l.trim() != "Message data:")
            .skip(1)
        {
            let Some((_, rest)) = l.trim_start().split_once(" - ") else {
                break;
            };
            let hex: String = rest.chars().take(48).collect();
            out.extend(
                hex.replace('-', " ")
                    .split_whitespace()
                    .map(|b| u8::from_str_radix(b, 16).unwrap()),
            );
        }
        out
    }

    #[test]
    fn the_fields_read_from_der_are_what_openssl_prints() {
        let digest = [0x5a; 32];
        let nonce = [0x9c, 0, 1, 2, 3, 4, 5, 6];
        let (path, bytes) = reply(&digest, nonce, "honest.tsr");
        let r = parse(&bytes, "honest.tsr").unwrap();
        assert_eq!(r.status, Status(0));
        assert!(r.status_text.is_empty());
        let t = r.token.expect("granted");
        let text = openssl(
            authority(),
            &["ts", "-reply", "-in", path.to_str().unwrap(), "-text"],
        );
        assert_eq!(field(&text, "Status:"), "Granted.");
        assert_eq!(field(&text, "Version:"), t.version.to_string());
        assert_eq!(field(&text, "Policy OID:"), t.policy);
        assert_eq!(field(&text, "Hash Algorithm:"), t.hash_algorithm);
        assert_eq!(openssl_imprint(&text), t.imprint);
        assert_eq!(t.imprint, digest);
        assert_eq!(field(&text, "Serial number:"), t.serial);
        assert_eq!(openssl_time(field(&text, "Time stamp:")), t.gen_time);
        assert_eq!(
            openssl_accuracy_ms(field(&text, "Accuracy:")),
            t.accuracy_ms
        );
        assert_eq!(t.accuracy_ms, 1_501, "1 s + 500 ms + 100 µs, rounded up");
        assert_eq!(field(&text, "Ordering:"), "yes");
        assert!(t.ordering);
        // The request's nonce has its high bit set: an unsigned integer.
        assert_eq!(field(&text, "Nonce:"), t.nonce.as_deref().unwrap());
        assert_eq!(t.nonce.as_deref(), Some("0x9C00010203040506"));
        assert_eq!(
            request(&digest, nonce).1,
            "0x9C00010203040506",
            "the request's nonce is shown as the token's"
        );
        assert_eq!(field(&text, "TSA:"), t.tsa_text());
        assert_eq!(t.tsa.as_deref(), Some("/C=DE/O=Unit Test Org/CN=Unit TSA"));
        assert_eq!(t.signer.as_deref(), t.tsa.as_deref());
        assert_eq!(t.tsa_is_signer, Some(true));
        assert_eq!(t.name("http://x/"), "/C=DE/O=Unit Test Org/CN=Unit TSA");
        // genTime to the millisecond (unless it fell on .000).
        assert_eq!(
            t.gen_time_fraction,
            t.gen_time.timestamp_subsec_nanos() != 0
        );
        // The token's bytes are those `openssl ts -reply -token_out` gives:
        // a seed derived from them is the one derived before.
        let out = authority().join("honest.token.der");
        openssl(
            authority(),
            &[
                "ts",
                "-reply",
                "-in",
                path.to_str().unwrap(),
                "-token_out",
                "-out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(std::fs::read(&out).unwrap(), t.token_der);
        // And read from the file, the same.
        let (b, again) = read(&path).unwrap();
        assert_eq!(b, bytes);
        assert_eq!(again.token.unwrap(), t);
    }

    /// `reply` with `text` as its status's free text (re-encoded).
    pub(crate) fn with_status_text(reply: &[u8], text: &[&str]) -> Vec<u8> {
        let mut r = TimeStampResp::from_der(reply).unwrap();
        r.status.status_string = Some(text.iter().map(|s| s.to_string()).collect());
        r.to_der().unwrap()
    }

    #[test]
    fn fields_forged_in_the_status_text_are_not_read() {
        let (_, bytes) = reply(&[7; 32], [1; 8], "forged-base.tsr");
        let honest = parse(&bytes, "x").unwrap().token.unwrap();
        let fake = [
            "ok\nTime stamp: Jan  1 00:00:00.000 2020 GMT\nAccuracy: 0x3C seconds, unspecified millis, unspecified micros\nNonce: 0x01\nTSA: DirName:/CN=Forged TSA\nSerial number: 0x99",
        ];
        let forged = with_status_text(&bytes, &fake);
        let path = authority().join("forged.tsr");
        std::fs::write(&path, &forged).unwrap();
        // What the text shows first is the forgery (the old reading).
        let text = openssl(
            authority(),
            &["ts", "-reply", "-in", path.to_str().unwrap(), "-text"],
        );
        assert_eq!(field(&text, "TSA:"), "DirName:/CN=Forged TSA");
        assert_eq!(field(&text, "Time stamp:"), "Jan  1 00:00:00.000 2020 GMT");
        // From the DER: the token's own fields.
        let (_, r) = read(&path).unwrap();
        let t = r.token.clone().unwrap();
        assert_eq!(t, honest);
        assert_eq!(t.tsa.as_deref(), Some("/C=DE/O=Unit Test Org/CN=Unit TSA"));
        assert_eq!(t.accuracy_ms, 1_501);
        assert_eq!(t.nonce.as_deref(), Some("0x0101010101010101"));
        // The text is kept only for messages, its controls escaped.
        assert!(
            r.status_line().contains("ok\\u{a}Time stamp"),
            "{}",
            r.status_line()
        );
        // A rejection carries no token, whatever its text says.
        let mut rejected = TimeStampResp::from_der(&forged).unwrap();
        rejected.status.status = 2;
        let r = parse(&rejected.to_der().unwrap(), "x").unwrap();
        assert!(!r.status.granted() && r.token.is_none());
        assert_eq!(r.status.to_string(), "rejection (PKIStatus 2)");
    }

    /// `reply` with its TSTInfo edited by `edit` (the signature no longer
    /// holds: only what is read is looked at).
    fn with_tst(reply: &[u8], edit: impl FnOnce(&mut TstInfo)) -> Vec<u8> {
        let mut r = TimeStampResp::from_der(reply).unwrap();
        let token = r.time_stamp_token.take().unwrap();
        let mut ci = ContentInfo::from_der(&token.to_der().unwrap()).unwrap();
        let mut sd = SignedData::from_der(&ci.content.to_der().unwrap()).unwrap();
        let econtent = sd.encap_content_info.econtent.take().unwrap();
        let mut tst = TstInfo::from_der(econtent.value()).unwrap();
        edit(&mut tst);
        let value = OctetString::new(tst.to_der().unwrap()).unwrap();
        sd.encap_content_info.econtent = Some(Any::encode_from(&value).unwrap());
        ci.content = Any::encode_from(&sd).unwrap();
        r.time_stamp_token = Some(Any::encode_from(&ci).unwrap());
        r.to_der().unwrap()
    }

    #[test]
    fn a_tsa_name_that_is_not_the_signers_is_told() {
        let (_, bytes) = reply(&[9; 32], [4; 8], "named.tsr");
        let other: Name = "CN=Official TSA".parse().unwrap();
        let named = with_tst(&bytes, |t| t.tsa = Some(GeneralName::DirectoryName(other)));
        let t = parse(&named, "x").unwrap().token.unwrap();
        assert_eq!(t.tsa.as_deref(), Some("/CN=Official TSA"));
        assert_eq!(t.tsa_is_signer, Some(false));
        assert_eq!(
            t.signer.as_deref(),
            Some("/C=DE/O=Unit Test Org/CN=Unit TSA")
        );
        // Without a name, the token's authority is its signer, not the
        // URL a record gives.
        let t = parse(&with_tst(&bytes, |t| t.tsa = None), "x")
            .unwrap()
            .token
            .unwrap();
        assert_eq!(t.tsa, None);
        assert_eq!(t.tsa_text(), "unspecified");
        assert_eq!(t.tsa_is_signer, None);
        assert_eq!(t.name("http://x/"), "/C=DE/O=Unit Test Org/CN=Unit TSA");
    }

    #[test]
    fn accuracies_are_read_in_full_and_bounded() {
        let (_, bytes) = reply(&[8; 32], [6; 8], "accuracy.tsr");
        let acc = |a: Option<Accuracy>| {
            parse(&with_tst(&bytes, |t| t.accuracy = a), "x").map(|r| r.token.unwrap().accuracy_ms)
        };
        assert_eq!(acc(None).unwrap(), 0);
        let a = |seconds, millis, micros| {
            Some(Accuracy {
                seconds,
                millis,
                micros,
            })
        };
        assert_eq!(acc(a(None, Some(1), None)).unwrap(), 1);
        assert_eq!(acc(a(None, None, Some(1))).unwrap(), 1, "rounded up");
        assert_eq!(acc(a(Some(2), Some(999), Some(999))).unwrap(), 3_000);
        assert_eq!(acc(a(Some(u64::MAX), None, None)).unwrap(), MAX_ACCURACY_MS);
        assert!(matches!(
            acc(a(None, Some(1000), None)),
            Err(TsaError::Malformed { .. })
        ));
    }

    #[test]
    fn malformed_replies_are_errors_naming_the_file() {
        let (_, bytes) = reply(&[3; 32], [2; 8], "to-cut.tsr");
        // Every truncation, and the reply with a byte too many.
        for n in 0..bytes.len() {
            let e = parse(&bytes[..n], "cut.tsr").unwrap_err();
            assert!(e.to_string().starts_with("cut.tsr: "), "{n}: {e}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            parse(&long, "long.tsr"),
            Err(TsaError::Der { .. })
        ));
        // Every byte flipped: an error or a reply, never a panic.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = parse(&b, "flipped.tsr");
        }
        // Granted without a token.
        let mut r = TimeStampResp::from_der(&bytes).unwrap();
        r.time_stamp_token = None;
        let e = parse(&r.to_der().unwrap(), "bare.tsr").unwrap_err();
        assert!(matches!(e, TsaError::Malformed { .. }), "{e}");
        assert!(e.to_string().contains("bare.tsr"), "{e}");
        // A token that is not signed data.
        let mut r = TimeStampResp::from_der(&bytes).unwrap();
        r.time_stamp_token = Some(
            Any::new(Tag::Sequence, {
                let ci = ContentInfo {
                    content_type: ID_CT_TST_INFO,
                    content: Any::null(),
                };
                let der = ci.to_der().unwrap();
                // The ContentInfo's value, under a SEQUENCE tag.
                der[2..].to_vec()
            })
            .unwrap(),
        );
        let e = parse(&r.to_der().unwrap(), "other.tsr").unwrap_err();
        assert!(e.to_string().contains("id-signedData"), "{e}");
        // Not a file to read: a link, a FIFO, a directory, too large.
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.tsr");
        std::fs::write(&real, &bytes).unwrap();
        let link = dir.path().join("link.tsr");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = read(&link).unwrap_err();
        assert!(
            matches!(
                e,
                TsaError::NotRegularFile {
                    found: "a symbolic link",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("link.tsr"), "{e}");
        let fifo = dir.path().join("fifo.tsr");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo).unwrap_err();
        assert!(
            matches!(
                e,
                TsaError::NotRegularFile {
                    found: "a FIFO",
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            read(dir.path()),
            Err(TsaError::NotRegularFile {
                found: "a directory",
                ..
            })
        ));
        let big = dir.path().join("big.tsr");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_REPLY_BYTES + 1).unwrap();
        let e = read(&big).unwrap_err();
        assert!(matches!(e, TsaError::TooLarge { .. }), "{e}");
        assert!(read(&real).is_ok());
    }

    #[test]
    fn times_integers_and_names_are_read_as_der_has_them() {
        let t = |s: &str| GenTime(s.as_bytes().to_vec()).parse();
        let (a, frac) = t("20261207210000Z").unwrap();
        assert_eq!(a.to_rfc3339(), "2026-12-07T21:00:00+00:00");
        assert!(!frac);
        let (b, frac) = t("20261207210000.25Z").unwrap();
        assert_eq!(b.timestamp_subsec_millis(), 250);
        assert!(frac);
        let (c, _) = t("20261207210000.1234567891Z").unwrap();
        assert_eq!(c.timestamp_subsec_nanos(), 123_456_789);
        for bad in [
            "20261207210000",
            "2026120721000Z",
            "20261207210000.Z",
            "20261307210000Z",
            "20261207210000+0100",
            "20261207210000,5Z",
        ] {
            assert_eq!(t(bad), None, "{bad}");
        }
        assert_eq!(integer_text(&[0x02], true), "0x02");
        assert_eq!(integer_text(&[0x00, 0x9c, 0x01], true), "0x9C01");
        assert_eq!(integer_text(&[0x00], true), "0x0");
        assert_eq!(integer_text(&[0xff], true), "0x-01");
        assert_eq!(integer_text(&[0x9c], false), "0x9C");
        assert_eq!(escape_bytes(b"A/B\x1b[2J\\"), "A/B\\x1B[2J\\x5C");
        assert_eq!(escape("a\u{1b}b\u{202e}c"), "a\\u{1b}b\\u{202e}c");
    }
}
