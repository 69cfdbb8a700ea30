#include "env_translate.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>

extern char** environ;

namespace braid::ncclshim {
namespace {

std::string trim(std::string_view text) {
  size_t b = 0;
  size_t e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return std::string(text.substr(b, e - b));
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> split(std::string_view text, std::string_view separators) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || separators.find(text[i]) != std::string_view::npos) {
      parts.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

bool isCollectiveName(const std::string& name) {
  static const std::array<std::string_view, 10> kNames = {
      "allreduce", "broadcast",  "reduce",     "allgather",      "reducescatter",
      "alltoall",  "all_reduce", "all_gather", "reduce_scatter", "all_to_all"};
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

/// Whether name is an NCCL algorithm Braid does not have (dropped from NCCL_ALGO). Every other
/// name goes to BRAID_ALGO as it is: NCCL's Ring and Tree are Braid's ring and tree, and Braid's
/// own names (rhd, direct, ...) are allowed; Braid validates the result.
bool isNcclOnlyAlgorithm(const std::string& name) {
  static const std::array<std::string_view, 6> kNcclOnly = {
      "collnet", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"};
  return std::find(kNcclOnly.begin(), kNcclOnly.end(), name) != kNcclOnly.end();
}

/// Reads a 0/1 switch such as NCCL_P2P_DISABLE.
std::string parseSwitch(const std::string& name, const std::string& value, bool* on) {
  const std::string v = trim(value);
  if (v == "1") {
    *on = true;
  } else if (v == "0" || v.empty()) {
    *on = false;
  } else {
    return name + ": '" + value + "' is not 0 or 1";
  }
  return "";
}

std::string parseChannels(const std::string& name, const std::string& value, int* out) {
  const std::string v = trim(value);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 1 || n > 1024) {
    return name + ": '" + value + "' is not a channel count";
  }
  *out = static_cast<int>(n);
  return "";
}

}  // namespace

std::string translateAlgo(std::string_view value, std::string* out,
                          std::vector<std::string>* notes) {
  std::vector<std::string> terms;
  for (const std::string& rawTerm : split(value, ";")) {
    if (rawTerm.empty()) continue;
    std::string term = lower(rawTerm);
    std::string prefix;
    std::string body = term;
    const size_t colon = term.find(':');
    if (colon != std::string::npos && isCollectiveName(trim(term.substr(0, colon)))) {
      prefix = trim(term.substr(0, colon)) + ":";
      body = trim(term.substr(colon + 1));
    }
    if (body.find(':') != std::string::npos) {
      // Size ranges exist only in Braid's grammar: Braid validates them itself.
      terms.push_back(prefix + body);
      continue;
    }
    const bool exclude = !body.empty() && body[0] == '^';
    if (exclude) body.erase(0, 1);
    std::vector<std::string> kept;
    for (const std::string& name : split(body, ",|")) {
      if (name.empty()) continue;
      if (isNcclOnlyAlgorithm(name)) {
        notes->push_back("NCCL_ALGO: " + name + " has no Braid equivalent; dropped");
        continue;
      }
      const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
      if (!plain) return "NCCL_ALGO: '" + name + "' in '" + rawTerm + "' is not an algorithm name";
      kept.push_back(name);
    }
    if (kept.empty()) {
      notes->push_back("NCCL_ALGO: term '" + rawTerm +
                       "' names no algorithm Braid has; the tuner chooses");
      continue;
    }
    terms.push_back(prefix + (exclude ? "^" : "") + join(kept, ","));
  }
  *out = join(terms, ";");
  return "";
}

std::string translateDebugSubsys(std::string_view value, std::string* out) {
  static const std::map<std::string, std::string> kMap = {
      {"INIT", "INIT"},   {"COLL", "COLL"},  {"P2P", "P2P"},     {"SHM", "SHM"},
      {"NET", "NET"},     {"GRAPH", "TOPO"}, {"TUNING", "TUNE"}, {"BOOTSTRAP", "BOOT"},
      {"ALLOC", "ALLOC"}, {"ALL", "ALL"},    {"ENV", "INIT"},    {"CALL", "COLL"},
      {"PROXY", "NET"},   {"REG", "ALLOC"},  {"NVLS", "CUDA"},   {"PROFILE", ""},
      {"RAS", ""},
  };
  std::string v = upper(trim(value));
  const bool negate = !v.empty() && v[0] == '^';
  if (negate) v.erase(0, 1);
  std::vector<std::string> kept;
  for (const std::string& token : split(v, ",")) {
    if (token.empty()) continue;
    auto it = kMap.find(token);
    if (it == kMap.end()) return "NCCL_DEBUG_SUBSYS: unknown subsystem '" + token + "'";
    if (!it->second.empty() && std::find(kept.begin(), kept.end(), it->second) == kept.end()) {
      kept.push_back(it->second);
    }
  }
  *out = (negate ? "^" : "") + join(kept, ",");
  return "";
}

std::string translateNetName(std::string_view netName, std::string* transport) {
  const std::string name = lower(trim(netName));
  transport->clear();
  if (name == "socket") {
    *transport = "^ib";
  } else if (name != "ib" && !name.empty()) {
    return "ncclConfig_t.netName: '" + std::string(netName) + "' is not IB or Socket";
  }
  return "";
}

std::string translateEnvironment(const std::vector<std::string>& environment, EnvTranslation* out) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : environment) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  auto has = [&](const std::string& name) { return env.count(name) != 0; };
  std::vector<std::string> used;
  auto set = [&](const std::string& from, const std::string& to, const std::string& value) {
    used.push_back(from);
    if (has(to)) {
      out->notes.push_back(from + " ignored: " + to + " is set");
      return;
    }
    out->settings.push_back(to + "=" + value);
    out->sources.emplace_back(to, from + "=" + env[from]);
    out->notes.push_back(from + "=" + env[from] + " -> " + to + "=" + value);
  };

  if (has("NCCL_DEBUG")) {
    const std::string level = upper(trim(env["NCCL_DEBUG"]));
    std::string braidLevel;
    if (level == "VERSION" || level == "WARN") {
      braidLevel = "WARN";
    } else if (level == "INFO" || level == "TRACE" || level == "NONE") {
      braidLevel = level;
    } else {
      return "NCCL_DEBUG: '" + env["NCCL_DEBUG"] + "' is not one of VERSION, WARN, INFO, TRACE";
    }
    out->printVersion = level == "VERSION" || level == "INFO" || level == "TRACE";
    set("NCCL_DEBUG", "BRAID_DEBUG", braidLevel);
  }
  if (has("NCCL_DEBUG_SUBSYS")) {
    std::string subsys;
    std::string error = translateDebugSubsys(env["NCCL_DEBUG_SUBSYS"], &subsys);
    if (!error.empty()) return error;
    set("NCCL_DEBUG_SUBSYS", "BRAID_DEBUG_SUBSYS", subsys);
  }
  if (has("NCCL_ALGO")) {
    std::string algo;
    std::string error = translateAlgo(env["NCCL_ALGO"], &algo, &out->notes);
    if (!error.empty()) return error;
    if (algo.empty()) {
      used.push_back("NCCL_ALGO");
    } else {
      set("NCCL_ALGO", "BRAID_ALGO", algo);
    }
  }
  // Same grammar and meaning in both libraries: passed through.
  const std::array<std::pair<std::string_view, std::string_view>, 5> kSame = {{
      {"NCCL_DEBUG_FILE", "BRAID_DEBUG_FILE"},
      {"NCCL_SOCKET_IFNAME", "BRAID_SOCKET_IFNAME"},
      {"NCCL_IB_HCA", "BRAID_IB_HCA"},
      {"NCCL_IB_GID_INDEX", "BRAID_IB_GID_INDEX"},
      {"NCCL_HOSTID", "BRAID_HOSTID"},
  }};
  for (const auto& [from, to] : kSame) {
    if (has(std::string(from))) set(std::string(from), std::string(to), env[std::string(from)]);
  }
  // NCCL bounds its channel count; Braid takes one number, so only equal bounds translate.
  if (has("NCCL_MIN_NCHANNELS") && has("NCCL_MAX_NCHANNELS")) {
    int lo = 0;
    int hi = 0;
    std::string error = parseChannels("NCCL_MIN_NCHANNELS", env["NCCL_MIN_NCHANNELS"], &lo);
    if (error.empty()) error = parseChannels("NCCL_MAX_NCHANNELS", env["NCCL_MAX_NCHANNELS"], &hi);
    if (!error.empty()) return error;
    if (lo == hi) {
      used.push_back("NCCL_MIN_NCHANNELS");
      set("NCCL_MAX_NCHANNELS", "BRAID_NCHANNELS", std::to_string(std::min(hi, 32)));
    }
  }
  // Transport switches become one BRAID_TRANSPORT exclusion list.
  std::vector<std::string> excluded;
  std::vector<std::string> transportVars;
  const std::array<std::pair<std::string_view, std::string_view>, 3> kDisable = {
      {{"NCCL_P2P_DISABLE", "p2p"}, {"NCCL_SHM_DISABLE", "shm"}, {"NCCL_IB_DISABLE", "ib"}}};
  for (const auto& [name, transport] : kDisable) {
    const std::string n(name);
    if (!has(n)) continue;
    bool on = false;
    std::string error = parseSwitch(n, env[n], &on);
    if (!error.empty()) return error;
    transportVars.push_back(n);
    if (on) excluded.emplace_back(transport);
  }
  if (has("NCCL_NET")) {
    std::string transport;
    std::string error = translateNetName(env["NCCL_NET"], &transport);
    if (!error.empty()) return "NCCL_NET: '" + env["NCCL_NET"] + "' is not IB or Socket";
    transportVars.push_back("NCCL_NET");
    if (!transport.empty() && std::find(excluded.begin(), excluded.end(), "ib") == excluded.end()) {
      excluded.emplace_back("ib");
    }
  }
  if (!transportVars.empty()) {
    used.insert(used.end(), transportVars.begin(), transportVars.end());
    if (!excluded.empty()) {
      const std::string value = "^" + join(excluded, ",");
      if (has("BRAID_TRANSPORT")) {
        out->notes.push_back(join(transportVars, ", ") + " ignored: BRAID_TRANSPORT is set");
      } else {
        out->settings.push_back("BRAID_TRANSPORT=" + value);
        out->sources.emplace_back("BRAID_TRANSPORT", join(transportVars, ", "));
        out->notes.push_back(join(transportVars, ", ") + " -> BRAID_TRANSPORT=" + value);
      }
    }
  }
  for (const auto& [name, value] : env) {
    if (name.rfind("NCCL_", 0) == 0 && std::find(used.begin(), used.end(), name) == used.end()) {
      out->notes.push_back(name + " ignored: Braid has no such setting");
    }
  }
  return "";
}

std::vector<std::string> processEnvironment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

}  // namespace braid::ncclshim
