//===- parser.cpp - Lexer and recursive-descent parser for .cir text --------------------------===//
#include "cubecc/ir/parser.h"

#include "cubecc/ir/float16.h"
#include "cubecc/ir/float_formats.h"
#include "cubecc/ir/semantics.h"
#include "float_literal.h"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace cubecc::ir {
namespace {

struct ParseFailure {
  uint32_t line;
  uint32_t col;
  std::string message;
};

//===- Lexer ---------------------------------------------------------------------------------===//

enum class Tok {
  Eof,
  Ident,   ///< bare word: op names, keywords, types (letters, digits, '_', '.')
  ValueId, ///< %name
  Symbol,  ///< @name or @"name"
  String,  ///< "..." (value holds the decoded bytes)
  Number,  ///< 12, -3, 0x1f, 1.5e-3
  LParen,
  RParen,
  LBrace,
  RBrace,
  Less,
  Greater,
  Comma,
  Colon,
  Equal,
  Minus,
};

std::string_view tok_name(Tok t) {
  switch (t) {
  case Tok::Eof:
    return "end of input";
  case Tok::Ident:
    return "identifier";
  case Tok::ValueId:
    return "value";
  case Tok::Symbol:
    return "symbol";
  case Tok::String:
    return "string";
  case Tok::Number:
    return "number";
  case Tok::LParen:
    return "'('";
  case Tok::RParen:
    return "')'";
  case Tok::LBrace:
    return "'{'";
  case Tok::RBrace:
    return "'}'";
  case Tok::Less:
    return "'<'";
  case Tok::Greater:
    return "'>'";
  case Tok::Comma:
    return "','";
  case Tok::Colon:
    return "':'";
  case Tok::Equal:
    return "'='";
  case Tok::Minus:
    return "'-'";
  }
  return "?";
}

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text; ///< the raw text of the token
  std::string value;     ///< identifier / name / decoded string contents
  uint32_t line = 1;
  uint32_t col = 1;
};

bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

/// Finds the first byte that does not belong to well-formed UTF-8 (overlongs, surrogates and
/// values past U+10FFFF included). Returns its offset, or npos.
size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((b & 0xe0) == 0xc0) {
      n = 2;
      cp = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
      n = 3;
      cp = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
      n = 4;
      cp = b & 0x07;
    } else {
      return i;
    }
    if (i + n > s.size())
      return i;
    for (size_t k = 1; k < n; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xc0) != 0x80)
        return i;
      cp = (cp << 6) | (c & 0x3f);
    }
    bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += n;
  }
  return std::string_view::npos;
}

class Lexer {
public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next() {
    skip_space_and_comments();
    Token t;
    t.line = line_;
    t.col = col_;
    size_t start = pos_;
    if (pos_ >= text_.size()) {
      t.kind = Tok::Eof;
      return t;
    }
    char c = text_[pos_];
    auto single = [&](Tok k) {
      advance();
      t.kind = k;
      t.text = text_.substr(start, 1);
      return t;
    };
    switch (c) {
    case '(':
      return single(Tok::LParen);
    case ')':
      return single(Tok::RParen);
    case '{':
      return single(Tok::LBrace);
    case '}':
      return single(Tok::RBrace);
    case '<':
      return single(Tok::Less);
    case '>':
      return single(Tok::Greater);
    case ',':
      return single(Tok::Comma);
    case ':':
      return single(Tok::Colon);
    case '=':
      return single(Tok::Equal);
    default:
      break;
    }
    if (c == '"') {
      t.kind = Tok::String;
      t.value = lex_string(t);
      t.text = text_.substr(start, pos_ - start);
      return t;
    }
    if (c == '%' || c == '@') {
      advance();
      if (c == '@' && pos_ < text_.size() && text_[pos_] == '"') {
        Token inner;
        inner.line = line_;
        inner.col = col_;
        t.value = lex_string(inner);
      } else {
        size_t name_start = pos_;
        while (pos_ < text_.size() && is_ident_char(text_[pos_]))
          advance();
        t.value = std::string(text_.substr(name_start, pos_ - name_start));
        if (t.value.empty())
          fail(t, fmt::format("expected a name after '{}'", c));
      }
      t.kind = c == '%' ? Tok::ValueId : Tok::Symbol;
      t.text = text_.substr(start, pos_ - start);
      return t;
    }
    bool digit_next =
        pos_ + 1 < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_ + 1]));
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '-' && digit_next)) {
      advance();
      bool hex = c == '0' && pos_ < text_.size() && (text_[pos_] == 'x' || text_[pos_] == 'X');
      while (pos_ < text_.size()) {
        char d = text_[pos_];
        char prev = text_[pos_ - 1];
        bool exponent_sign = (d == '+' || d == '-') && !hex && (prev == 'e' || prev == 'E');
        if (!is_ident_char(d) && !exponent_sign)
          break;
        advance();
      }
      t.kind = Tok::Number;
      t.text = text_.substr(start, pos_ - start);
      return t;
    }
    if (c == '-')
      return single(Tok::Minus);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < text_.size() && is_ident_char(text_[pos_]))
        advance();
      t.kind = Tok::Ident;
      t.text = text_.substr(start, pos_ - start);
      t.value = std::string(t.text);
      return t;
    }
    auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f)
      fail(t, fmt::format("unexpected character '{}'", c));
    if (b < 0x80)
      fail(t, fmt::format("unexpected control character 0x{:02X}", b));
    fail(t, fmt::format("unexpected byte 0x{:02X} (non-ASCII text is allowed only in comments and "
                        "strings)",
                        b));
  }

  [[noreturn]] static void fail(const Token &at, std::string message) {
    throw ParseFailure{at.line, at.col, std::move(message)};
  }

private:
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else if ((static_cast<unsigned char>(text_[pos_]) & 0xc0) != 0x80) {
      ++col_; // columns count characters, not UTF-8 continuation bytes
    }
    ++pos_;
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n')
          advance();
      } else {
        break;
      }
    }
  }

  std::string lex_string(const Token &at) {
    std::string out;
    advance(); // opening quote
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n')
        fail(at, "unterminated string literal");
      char c = text_[pos_];
      if (c == '"') {
        advance();
        return out;
      }
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      advance();
      if (pos_ >= text_.size())
        fail(at, "unterminated string literal");
      char e = text_[pos_];
      if (e == '"' || e == '\\') {
        out += e;
        advance();
      } else if (e == 'n') {
        out += '\n';
        advance();
      } else if (e == 't') {
        out += '\t';
        advance();
      } else if (pos_ + 1 < text_.size() && std::isxdigit(static_cast<unsigned char>(e)) &&
                 std::isxdigit(static_cast<unsigned char>(text_[pos_ + 1]))) {
        out += static_cast<char>(std::stoi(std::string(text_.substr(pos_, 2)), nullptr, 16));
        advance();
        advance();
      } else {
        Token here;
        here.line = line_;
        here.col = col_;
        fail(here, "invalid escape in string literal (use \\\", \\\\, \\n, \\t or \\XX)");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  uint32_t col_ = 1;
};

//===- Parser --------------------------------------------------------------------------------===//

class Parser {
public:
  Parser(std::string_view text, SourceMap &map) : lexer_(text), map_(map) {
    for (Token &t : ahead_)
      t = lexer_.next();
  }

  std::unique_ptr<Module> module() {
    expect_keyword("module");
    auto m = std::make_unique<Module>();
    module_ = m.get();
    if (tok().kind == Tok::Symbol)
      m->set_name(take().value);
    Token open = expect(Tok::LBrace, "to open the module body");
    while (tok().kind != Tok::RBrace) {
      if (tok().kind == Tok::Eof)
        fail(tok(), fmt::format("unexpected end of input: expected '}}' to close the module "
                                "opened at {}:{}",
                                open.line, open.col));
      kernel();
    }
    take();
    if (tok().kind != Tok::Eof)
      fail(tok(), fmt::format("unexpected {} after the end of the module (one module per file)",
                              describe(tok())));
    return m;
  }

private:
  //===- Tokens ------------------------------------------------------------------------------===//

  const Token &tok() const { return ahead_[0]; }
  const Token &peek(unsigned n) const { return ahead_[n]; }
  Token take() {
    Token t = std::move(ahead_[0]);
    ahead_[0] = std::move(ahead_[1]);
    ahead_[1] = std::move(ahead_[2]);
    ahead_[2] = lexer_.next();
    return t;
  }

  [[noreturn]] static void fail(const Token &at, std::string message) {
    Lexer::fail(at, std::move(message));
  }

  static std::string describe(const Token &t) {
    switch (t.kind) {
    case Tok::Eof:
      return "end of input";
    case Tok::Ident:
    case Tok::ValueId:
    case Tok::Symbol:
    case Tok::String:
    case Tok::Number:
      return fmt::format("{} '{}'", tok_name(t.kind), t.text);
    default:
      return std::string(tok_name(t.kind)); // punctuation names itself: "'('"
    }
  }

  Token expect(Tok kind, std::string_view what) {
    if (tok().kind != kind)
      fail(tok(), fmt::format("expected {} {}, found {}", tok_name(kind), what, describe(tok())));
    return take();
  }

  void expect_keyword(std::string_view word) {
    if (tok().kind != Tok::Ident || tok().value != word)
      fail(tok(), fmt::format("expected '{}', found {}", word, describe(tok())));
    take();
  }

  bool is_keyword(std::string_view word) const {
    return tok().kind == Tok::Ident && tok().value == word;
  }

  //===- Numbers -----------------------------------------------------------------------------===//

  /// A non-negative integer literal no larger than `max`, decimal or 0x-hexadecimal.
  uint64_t unsigned_number(const Token &t, uint64_t max, std::string_view what) {
    if (t.kind != Tok::Number)
      fail(t, fmt::format("expected {} (a number), found {}", what, describe(t)));
    std::string_view s = t.text;
    if (!s.empty() && s[0] == '-')
      fail(t, fmt::format("{} must not be negative, found '{}'", what, s));
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      base = 16;
      s.remove_prefix(2);
    }
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > max))
      fail(t, fmt::format("{} '{}' is too large (at most {})", what, t.text, max));
    if (ec != std::errc() || end != s.data() + s.size())
      fail(t, fmt::format("expected {} (an integer), found '{}'", what, t.text));
    return value;
  }

  uint32_t u32_number(std::string_view what) {
    return static_cast<uint32_t>(
        unsigned_number(take(), std::numeric_limits<uint32_t>::max(), what));
  }

  /// A signed 64-bit integer attribute value.
  int64_t int64_number(const Token &t) {
    if (t.text.size() > 1 && t.text[0] == '-') {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (ec == std::errc::result_out_of_range)
        fail(t, fmt::format("attribute value '{}' is too small (at least {})", t.text,
                            std::numeric_limits<int64_t>::min()));
      if (ec != std::errc() || end != t.text.data() + t.text.size())
        fail(t, fmt::format("expected an attribute value (an integer), found '{}'", t.text));
      return v;
    }
    return static_cast<int64_t>(
        unsigned_number(t, std::numeric_limits<int64_t>::max(), "an attribute value"));
  }

  /// The literal of a `const` of scalar type `type`, as its bit pattern (zero-extended).
  int64_t constant_bits(const Token &t, bool negated_ident, Type type) {
    Scalar s = type.element();
    unsigned width = scalar_bits(s);
    uint64_t mask = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    std::string type_name(scalar_name(s));
    switch (scalar_class(s)) {
    case ScalarClass::Bool:
      if (t.kind == Tok::Ident && (t.value == "true" || t.value == "false") && !negated_ident)
        return t.value == "true" ? 1 : 0;
      fail(t, fmt::format("expected 'true' or 'false' for a bool constant, found {}", describe(t)));
    case ScalarClass::Signed:
    case ScalarClass::Unsigned: {
      if (t.kind != Tok::Number || negated_ident)
        fail(t, fmt::format("expected an integer literal for a constant of type {}, found {}",
                            type_name, describe(t)));
      std::string_view text = t.text;
      bool negative = text[0] == '-';
      if (negative)
        text.remove_prefix(1);
      if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        Token digits = t;
        digits.text = text;
        if (negative)
          fail(t, "a hexadecimal constant gives the bit pattern and takes no sign");
        return static_cast<int64_t>(unsigned_number(digits, mask, "the constant"));
      }
      if (text.find_first_not_of("0123456789") != std::string_view::npos)
        fail(t, fmt::format("expected an integer literal for a constant of type {}, found '{}'",
                            type_name, t.text));
      Token digits = t;
      digits.text = text;
      bool is_signed_type = scalar_class(s) == ScalarClass::Signed;
      if (negative && !is_signed_type)
        fail(t, fmt::format("integer literal '{}' does not fit in {}", t.text, type_name));
      uint64_t limit = is_signed_type ? (negative ? uint64_t{1} << (width - 1)
                                                  : (uint64_t{1} << (width - 1)) - 1)
                                      : mask;
      uint64_t magnitude = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude);
      if (ec != std::errc() || end != text.data() + text.size() || magnitude > limit)
        fail(t, fmt::format("integer literal '{}' does not fit in {}", t.text, type_name));
      uint64_t bits = negative ? uint64_t{0} - magnitude : magnitude;
      return static_cast<int64_t>(bits & mask);
    }
    case ScalarClass::Float:
    case ScalarClass::StorageFloat:
      return float_bits(t, negated_ident, s, mask);
    }
    fail(t, "unsupported constant type");
  }

  int64_t float_bits(const Token &t, bool negated, Scalar s, uint64_t mask) {
    std::string type_name(scalar_name(s));
    if (t.kind == Tok::Ident && t.value == "inf") {
      if (is_storage_float(s) && float_format(s).specials != FloatSpecials::Ieee)
        fail(t, fmt::format("{} has no infinity; write its largest value or its bit pattern",
                            type_name));
      return static_cast<int64_t>(from_double(s, negated ? -HUGE_VAL : HUGE_VAL));
    }
    if (t.kind != Tok::Number || negated)
      fail(t, fmt::format("expected a float literal for a constant of type {}, found {}", type_name,
                          describe(t)));
    std::string_view text = t.text;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
      return static_cast<int64_t>(unsigned_number(t, mask, "the constant's bit pattern"));
    detail::FloatLiteral literal = detail::parse_decimal_float(text, s);
    if (literal.error == detail::FloatLiteralError::Overflow)
      fail(t, fmt::format("float literal '{}' is out of range for {}", text, type_name));
    if (literal.error)
      fail(t, fmt::format("malformed float literal '{}'", text));
    return static_cast<int64_t>(literal.bits);
  }

  //===- Types -------------------------------------------------------------------------------===//

  Scalar scalar_type(const Token &t) {
    if (t.kind == Tok::Ident)
      if (auto s = parse_scalar(t.value))
        return *s;
    fail(t, fmt::format("expected an element type (bool, i8..i64, u8..u64, f16, bf16, f32, f64, "
                        "e4m3, e5m2, e2m1, ue8m0), found {}",
                        describe(t)));
  }

  Type type() {
    Token t = take();
    if (t.kind != Tok::Ident)
      fail(t, fmt::format("expected a type, found {}", describe(t)));
    if (auto s = parse_scalar(t.value))
      return Type::scalar(*s);
    if (t.value == "buffer") {
      expect(Tok::Less, "after 'buffer'");
      Scalar s = scalar_type(take());
      expect(Tok::Comma, "between the element type and the access mode");
      Token a = take();
      Access access;
      if (a.kind == Tok::Ident && a.value == "read")
        access = Access::Read;
      else if (a.kind == Tok::Ident && a.value == "write")
        access = Access::Write;
      else if (a.kind == Tok::Ident && a.value == "readwrite")
        access = Access::ReadWrite;
      else
        fail(a, fmt::format("expected an access mode (read, write, readwrite), found {}",
                            describe(a)));
      expect(Tok::Greater, "to close the buffer type");
      return Type::buffer(s, access);
    }
    if (t.value == "shared" || t.value == "local") {
      expect(Tok::Less, fmt::format("after '{}'", t.value));
      Scalar s = scalar_type(take());
      expect(Tok::Comma, "between the element type and the element count");
      uint32_t count = u32_number("an element count");
      expect(Tok::Greater, fmt::format("to close the {} type", t.value));
      return t.value == "shared" ? Type::shared(s, count) : Type::local(s, count);
    }
    if (t.value == "matrix") {
      expect(Tok::Less, "after 'matrix'");
      Token scope = take();
      if (scope.kind != Tok::Ident || scope.value != "subgroup")
        fail(scope, fmt::format("expected the matrix scope 'subgroup' (the only one), found {}",
                                describe(scope)));
      expect(Tok::Comma, "after the matrix scope");
      Token r = take();
      std::optional<MatrixRole> role;
      for (MatrixRole candidate : {MatrixRole::A, MatrixRole::B, MatrixRole::Accumulator})
        if (r.kind == Tok::Ident && r.value == matrix_role_name(candidate))
          role = candidate;
      if (!role)
        fail(r, fmt::format("expected a matrix role (a, b, acc), found {}", describe(r)));
      expect(Tok::Comma, "after the matrix role");
      Scalar s = scalar_type(take());
      expect(Tok::Comma, "between the element type and the rows");
      auto rows = static_cast<uint32_t>(unsigned_number(take(), 0xFFFF, "the number of rows"));
      expect(Tok::Comma, "between the rows and the columns");
      auto cols = static_cast<uint32_t>(unsigned_number(take(), 0xFFFF, "the number of columns"));
      expect(Tok::Greater, "to close the matrix type");
      return Type::matrix(*role, s, rows, cols);
    }
    // A vector: <scalar>x<lanes>, e.g. f32x4.
    size_t x = t.value.rfind('x');
    if (x != std::string::npos && x > 0) {
      auto s = parse_scalar(std::string_view(t.value).substr(0, x));
      std::string_view digits = std::string_view(t.value).substr(x + 1);
      uint64_t lanes = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), lanes);
      bool all_digits = !digits.empty() && end == digits.data() + digits.size();
      if (s && all_digits && (ec == std::errc() || ec == std::errc::result_out_of_range)) {
        if (ec != std::errc() || !Type::valid_lanes(lanes))
          fail(t, fmt::format("vector type '{}': vectors have 2, 3, 4, 8 or 16 lanes, not {}",
                              t.value, digits));
        return Type::vector(*s, static_cast<uint32_t>(lanes));
      }
    }
    fail(t, fmt::format("unknown type '{}'", t.value));
  }

  //===- Values and scopes -------------------------------------------------------------------===//

  /// Names are scoped like values: a name may be reused in a sibling region, never while an
  /// earlier definition is still visible.
  void define(const Token &t, Value *v) {
    for (const Scope &scope : scopes_)
      if (auto it = scope.find(t.value); it != scope.end())
        fail(t, fmt::format("redefinition of value '%{}' (first defined at {}:{})", t.value,
                            it->second.position.line, it->second.position.col));
    defined_[t.value] = TextPosition{t.line, t.col};
    scopes_.back().emplace(t.value, Definition{v, TextPosition{t.line, t.col}});
    if (t.value[0] == '.')
      fail(t, fmt::format("value name '%{}' must start with a letter, '_' or (for numbered values) "
                          "a digit",
                          t.value));
    bool numbered = std::isdigit(static_cast<unsigned char>(t.value[0]));
    if (!numbered)
      v->set_name(t.value);
    else if (t.value.find_first_not_of("0123456789") != std::string::npos)
      fail(t, fmt::format("value name '%{}' must start with a letter or '_' (only numbered "
                          "values like %7 start with a digit)",
                          t.value));
  }

  Value *use(const Token &t) {
    if (t.kind != Tok::ValueId)
      fail(t, fmt::format("expected a value (%name), found {}", describe(t)));
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(t.value);
      if (found != it->end())
        return found->second.value;
    }
    if (pending_results_.count(t.value))
      fail(t, fmt::format("value '%{}' is used inside the op that defines it (a result exists only "
                          "after its op)",
                          t.value));
    if (defined_.count(t.value))
      fail(t, fmt::format("value '%{}' is used outside the region that defines it", t.value));
    fail(t, fmt::format("use of undefined value '%{}' (values must be defined before use, in the "
                        "same region or an enclosing one)",
                        t.value));
  }

  //===- Structure ---------------------------------------------------------------------------===//

  void attributes(AttributeList &attrs) {
    expect(Tok::LBrace, "to open the attributes");
    if (tok().kind == Tok::RBrace)
      fail(tok(), "an attribute list needs at least one 'name = value'; leave out empty braces");
    while (true) {
      Token name = expect(Tok::Ident, "as an attribute name");
      if (attrs.find(name.value))
        fail(name, fmt::format("attribute '{}' is given twice", name.value));
      expect(Tok::Equal, "after the attribute name");
      Token v = take();
      if (v.kind == Tok::Number)
        attrs.set(name.value, int64_number(v));
      else if (v.kind == Tok::String)
        attrs.set(name.value, v.value);
      else
        fail(v, fmt::format("expected an attribute value (an integer or a string), found {}",
                            describe(v)));
      if (tok().kind == Tok::RBrace)
        break;
      expect(Tok::Comma, "between attributes");
    }
    take();
  }

  bool at_attributes() const {
    return tok().kind == Tok::LBrace && peek(1).kind == Tok::Ident && peek(2).kind == Tok::Equal;
  }

  Location location() {
    if (!is_keyword("loc"))
      return {};
    take();
    expect(Tok::LParen, "after 'loc'");
    Token file = expect(Tok::String, "(the file name) in the location");
    if (file.value.empty())
      fail(file, "the file name of a location must not be empty");
    expect(Tok::Colon, "after the file name");
    uint32_t line = u32_number("a line number");
    expect(Tok::Colon, "after the line number");
    uint32_t col = u32_number("a column number");
    expect(Tok::RParen, "to close the location");
    return module_->location(file.value, line, col);
  }

  void kernel() {
    Token kw = tok();
    expect_keyword("kernel");
    Token name = expect(Tok::Symbol, "(the kernel name, e.g. @axpy) after 'kernel'");
    if (module_->find_kernel(name.value))
      fail(name, fmt::format("kernel '@{}' is defined twice in this module", name.value));
    Kernel &k = module_->add_kernel(name.value);
    map_.kernels[&k] = {kw.line, kw.col};
    defined_.clear();
    scopes_.assign(1, {});
    expect(Tok::LParen, "to open the kernel parameters");
    while (tok().kind != Tok::RParen) {
      if (k.num_parameters())
        expect(Tok::Comma, "between kernel parameters");
      Token p = expect(Tok::ValueId, "(a parameter name)");
      expect(Tok::Colon, "after the parameter name");
      define(p, k.add_parameter(type()));
    }
    take();
    if (is_keyword("workgroup")) {
      take();
      expect(Tok::LParen, "after 'workgroup'");
      std::array<uint32_t, 3> size{};
      for (int i = 0; i < 3; ++i) {
        if (i)
          expect(Tok::Comma, "between workgroup dimensions");
        size[i] = u32_number("a workgroup dimension");
      }
      expect(Tok::RParen, "to close the workgroup size");
      k.set_workgroup_size(size);
    }
    if (is_keyword("attributes")) {
      take();
      attributes(k.attributes());
    }
    region_body(k.body(), 0);
    k.set_location(location());
  }

  void region_body(Region &region, unsigned depth) {
    if (depth > kMaxRegionDepth)
      fail(tok(), fmt::format("regions nested deeper than {} levels", kMaxRegionDepth));
    Token open = expect(Tok::LBrace, "to open a region");
    while (tok().kind != Tok::RBrace) {
      if (tok().kind == Tok::Eof)
        fail(tok(), fmt::format("unexpected end of input: expected '}}' to close the region "
                                "opened at {}:{}",
                                open.line, open.col));
      operation(region, depth);
    }
    take();
  }

  void operation(Region &region, unsigned depth) {
    Token start = tok();
    std::vector<Token> result_names;
    if (tok().kind == Tok::ValueId) {
      while (true) {
        result_names.push_back(take());
        if (tok().kind != Tok::Comma)
          break;
        take();
        if (tok().kind != Tok::ValueId)
          fail(tok(), fmt::format("expected a result name after ',', found {}", describe(tok())));
      }
      expect(Tok::Equal, "after the result names");
    }
    Token name = tok();
    if (name.kind != Tok::Ident)
      fail(name, fmt::format("expected an operation name, found {}", describe(name)));
    auto opcode = parse_opcode(name.value);
    if (!opcode)
      fail(name, fmt::format("unknown operation '{}'", name.value));
    take();
    const OpInfo &info = op_info(*opcode);

    std::vector<Value *> operands;
    Token literal;
    bool negated_literal = false;
    if (*opcode == Opcode::Const) {
      if (tok().kind == Tok::Minus) {
        Token minus = take();
        if (!(tok().kind == Tok::Ident && tok().value == "inf") || tok().col != minus.col + 1 ||
            tok().line != minus.line)
          fail(minus, "a '-' in a constant must be followed directly by a number (-1, -2.5) or "
                      "by inf (-inf)");
        negated_literal = true;
      }
      if (tok().kind != Tok::Number && tok().kind != Tok::Ident)
        fail(tok(),
             fmt::format("expected a literal after 'const' (e.g. 'const 1.5 : f32'), found {}",
                         describe(tok())));
      literal = take();
    } else {
      int fixed = fixed_operand_count(info.signature);
      if (fixed >= 0) {
        for (int i = 0; i < fixed; ++i) {
          if (i)
            expect(Tok::Comma,
                   fmt::format("between the operands of '{}' (it takes {})", info.name, fixed));
          if (tok().kind != Tok::ValueId)
            fail(tok(), fmt::format("'{}' takes {} operand(s); expected a value, found {}",
                                    info.name, fixed, describe(tok())));
          operands.push_back(use(take()));
        }
      } else if (tok().kind == Tok::ValueId) {
        operands.push_back(use(take()));
        while (tok().kind == Tok::Comma) {
          take();
          operands.push_back(use(take()));
        }
        if (tok().kind == Tok::ValueId && tok().line == name.line)
          fail(tok(), fmt::format("expected ',' between the operands of '{}', found {}", info.name,
                                  describe(tok())));
      }
      if (fixed >= 0 && tok().kind == Tok::Comma)
        fail(tok(), fmt::format("'{}' takes {} operand(s); found ',' after the last one", info.name,
                                fixed));
      // A value on the same line after a fixed-arity op is a stray operand, not the next op.
      if (fixed >= 0 && tok().kind == Tok::ValueId && tok().line == name.line &&
          peek(1).kind != Tok::Equal && peek(1).kind != Tok::Comma)
        fail(tok(), fmt::format("'{}' takes {} operand(s); found another: {}", info.name, fixed,
                                describe(tok())));
    }

    AttributeList attrs;
    bool has_regions = region_count(info.signature) > 0;
    if (at_attributes() || (!has_regions && tok().kind == Tok::LBrace))
      attributes(attrs);

    std::vector<Type> types;
    if (!result_names.empty() && tok().kind != Tok::Colon)
      fail(tok(), fmt::format("expected ':' and the result type(s) of '{}', found {}", info.name,
                              describe(tok())));
    if (tok().kind == Tok::Colon) {
      take();
      types.push_back(type());
      while (tok().kind == Tok::Comma) {
        take();
        types.push_back(type());
      }
    }
    if (types.size() != result_names.size())
      fail(name, fmt::format("'{}' names {} result(s) but gives {} result type(s)", info.name,
                             result_names.size(), types.size()));

    if (*opcode == Opcode::Const) {
      if (types.size() != 1)
        fail(name, "'const' has one result: write '%c = const <literal> : <type>'");
      if (!types[0].is_scalar())
        fail(name, fmt::format("'const' makes scalars, not '{}' (use 'splat' for vectors)",
                               types[0].str()));
      if (!attrs.empty())
        fail(name, "'const' takes no attributes: its value is the literal ('const 2 : i32')");
      attrs.set("value", constant_bits(literal, negated_literal, types[0]));
    }

    auto op = Operation::create(*opcode, operands, types, region_count(info.signature), {},
                                &module_->arena());
    op->attributes() = std::move(attrs);
    Operation *raw = region.push_back(std::move(op));
    map_.ops[raw] = {start.line, start.col};
    for (const Token &r : result_names)
      pending_results_.insert(r.value);

    for (unsigned r = 0; r < raw->num_regions(); ++r) {
      Region &inner = raw->region(r);
      if (r == 1 && *opcode == Opcode::If) {
        if (!is_keyword("else")) {
          if (!types.empty())
            fail(start, "an 'if' with results needs an 'else' region that yields them");
          inner.push_back(Operation::create(Opcode::Yield, {}, {}, 0, {}, &module_->arena()));
          continue;
        }
        take();
      }
      if (r == 1 && *opcode == Opcode::While)
        expect_keyword("do");
      scopes_.emplace_back();
      if (tok().kind == Tok::LParen) {
        take();
        while (tok().kind != Tok::RParen) {
          if (inner.num_arguments())
            expect(Tok::Comma, "between region arguments");
          Token a = expect(Tok::ValueId, "(a region argument name)");
          expect(Tok::Colon, "after the region argument name");
          define(a, inner.add_argument(type()));
        }
        take();
      }
      region_body(inner, depth + 1);
      scopes_.pop_back();
    }
    for (const Token &r : result_names)
      pending_results_.erase(r.value);
    for (size_t i = 0; i < result_names.size(); ++i)
      define(result_names[i], raw->result(static_cast<unsigned>(i)));
    raw->set_location(location());
  }

  Lexer lexer_;
  Token ahead_[3];
  SourceMap &map_;
  Module *module_ = nullptr;
  struct Definition {
    Value *value;
    TextPosition position;
  };
  using Scope = std::unordered_map<std::string, Definition>;
  std::vector<Scope> scopes_;
  /// Every name defined so far in the kernel, for the "used outside its region" message.
  std::unordered_map<std::string, TextPosition> defined_;
  /// Results of the op being parsed, which its own regions must not use.
  std::unordered_set<std::string> pending_results_;
};

} // namespace

ParseResult parse_module(std::string_view text, std::string_view buffer_name) {
  ParseResult result;
  result.source_map.buffer_name = std::string(buffer_name);
  size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    uint32_t line = 1, col = 1;
    for (size_t i = 0; i < bad; ++i) {
      if (text[i] == '\n') {
        line++;
        col = 1;
      } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
        col++;
      }
    }
    result.errors.push_back({std::string(buffer_name),
                             line,
                             col,
                             fmt::format("invalid UTF-8 (byte 0x{:02X} at offset {})",
                                         static_cast<unsigned char>(text[bad]), bad),
                             {}});
    return result;
  }
  try {
    Parser parser(text, result.source_map);
    result.module = parser.module();
  } catch (const ParseFailure &f) {
    result.module.reset();
    result.source_map.ops.clear();
    result.source_map.kernels.clear();
    result.errors.push_back({std::string(buffer_name), f.line, f.col, f.message, {}});
  }
  return result;
}

} // namespace cubecc::ir
