#include "features.hpp"

#include "text.hpp"

#include <algorithm>
#include <charconv>

namespace pathkeeper::selector {

Features kernelEffective(Features features) {
  if (features.queueMode == QueueMode::Bio) {
    features.retainAttachedHwHandler = true;
  }
  if (features.queueMode == QueueMode::Rq || features.queueMode == QueueMode::Mq) {
    features.queueMode = QueueMode::Default;
  }
  return features;
}

std::vector<std::string> renderFeatureArgs(const Features &requested) {
  const Features features = kernelEffective(requested);
  std::vector<std::string> args;
  if (features.queueIfNoPath) {
    args.emplace_back("queue_if_no_path");
  }
  if (features.pgInitRetries) {
    args.emplace_back("pg_init_retries");
    args.push_back(std::to_string(*features.pgInitRetries));
  }
  if (features.pgInitDelayMsecs) {
    args.emplace_back("pg_init_delay_msecs");
    args.push_back(std::to_string(*features.pgInitDelayMsecs));
  }
  if (features.retainAttachedHwHandler) {
    args.emplace_back("retain_attached_hw_handler");
  }
  switch (features.queueMode) {
  case QueueMode::Default:
    break;
  case QueueMode::Bio:
    args.emplace_back("queue_mode");
    args.emplace_back("bio");
    break;
  case QueueMode::Rq:
  case QueueMode::Mq:
    break; // the request-based default: kernelEffective dropped it
  }
  return args;
}

std::string renderFeatures(const Features &features) {
  auto args = renderFeatureArgs(features);
  std::string out = std::to_string(args.size());
  for (const auto &arg : args) {
    out += ' ';
    out += arg;
  }
  return out;
}

Expected<Features> parseFeatureArgs(std::span<const std::string> args) {
  if (args.size() > kMaxFeatureArgs) {
    return fail("invalid number of feature args: " + std::to_string(args.size()) +
                " (the kernel accepts 0-8)");
  }
  Features features;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string &name = args[i];
    const bool hasValue = i + 1 < args.size();
    if (iequals(name, "queue_if_no_path")) {
      features.queueIfNoPath = true;
    } else if (iequals(name, "retain_attached_hw_handler")) {
      features.retainAttachedHwHandler = true;
    } else if (iequals(name, "pg_init_retries") && hasValue) {
      auto value = parseUnsigned(args[++i]);
      if (!value || *value < kMinPgInitRetries || *value > kMaxPgInitRetries) {
        return fail("pg_init_retries must be between 1 and 50, got '" + args[i] + "'");
      }
      features.pgInitRetries = static_cast<unsigned>(*value);
    } else if (iequals(name, "pg_init_delay_msecs") && hasValue) {
      auto value = parseUnsigned(args[++i]);
      if (!value || *value > kMaxPgInitDelayMsecs) {
        return fail("pg_init_delay_msecs must be between 0 and 60000, got '" + args[i] + "'");
      }
      features.pgInitDelayMsecs = static_cast<unsigned>(*value);
    } else if (iequals(name, "queue_mode") && hasValue) {
      const std::string &mode = args[++i];
      if (iequals(mode, "bio")) {
        features.queueMode = QueueMode::Bio;
      } else if (iequals(mode, "rq")) {
        features.queueMode = QueueMode::Rq;
      } else if (iequals(mode, "mq")) {
        features.queueMode = QueueMode::Mq;
      } else {
        return fail("unknown queue_mode '" + mode + "' (expected bio, rq or mq)");
      }
    } else {
      return fail("unrecognised multipath feature '" + name + "'" +
                  (hasValue ? "" : " (or its value is missing)"));
    }
  }
  return features;
}

Expected<Features> parseFeatures(std::string_view text) {
  auto words = splitWords(text);
  if (words.empty()) {
    return fail("empty features string (expected '<count> <args...>')");
  }
  auto count = parseUnsigned(words.front());
  if (!count) {
    return fail("features string must start with the argument count, got '" + words.front() + "'");
  }
  if (*count != words.size() - 1) {
    return fail("features string announces " + words.front() + " args but has " +
                std::to_string(words.size() - 1));
  }
  return parseFeatureArgs(std::span<const std::string>(words).subspan(1));
}

Expected<std::string> addFeature(std::string_view features, std::string_view feature) {
  auto parsed = parseFeatures(features);
  if (!parsed) {
    return fail(parsed.error());
  }
  auto words = splitWords(feature);
  auto extra = parseFeatureArgs(words);
  if (!extra) {
    return fail(extra.error());
  }
  Features merged = *parsed;
  merged.queueIfNoPath = merged.queueIfNoPath || extra->queueIfNoPath;
  merged.retainAttachedHwHandler = merged.retainAttachedHwHandler || extra->retainAttachedHwHandler;
  if (extra->pgInitRetries) {
    merged.pgInitRetries = extra->pgInitRetries;
  }
  if (extra->pgInitDelayMsecs) {
    merged.pgInitDelayMsecs = extra->pgInitDelayMsecs;
  }
  if (extra->queueMode != QueueMode::Default) {
    merged.queueMode = extra->queueMode;
  }
  auto args = renderFeatureArgs(merged);
  if (args.size() > kMaxFeatureArgs) {
    return fail("adding '" + std::string(feature) + "' exceeds the kernel's 8 feature args");
  }
  return renderFeatures(merged);
}

Expected<std::string> removeFeature(std::string_view features, std::string_view name) {
  auto parsed = parseFeatures(features);
  if (!parsed) {
    return fail(parsed.error());
  }
  Features out = *parsed;
  if (iequals(name, "queue_if_no_path")) {
    out.queueIfNoPath = false;
  } else if (iequals(name, "retain_attached_hw_handler")) {
    out.retainAttachedHwHandler = false;
  } else if (iequals(name, "pg_init_retries")) {
    out.pgInitRetries.reset();
  } else if (iequals(name, "pg_init_delay_msecs")) {
    out.pgInitDelayMsecs.reset();
  } else if (iequals(name, "queue_mode")) {
    out.queueMode = QueueMode::Default;
  } else {
    return fail("unrecognised multipath feature '" + std::string(name) + "'");
  }
  return renderFeatures(out);
}

ReconciledFeatures reconcileFeatures(Features features, const NoPathRetry &noPathRetry) {
  ReconciledFeatures out{features, {}};
  const bool wantQueue = noPathRetry.kind != NoPathRetry::Kind::Fail;
  if (features.queueIfNoPath && !wantQueue) {
    out.notes.emplace_back("queue_if_no_path removed: no_path_retry is 'fail'");
  }
  out.features.queueIfNoPath = wantQueue;
  return out;
}

} // namespace pathkeeper::selector
