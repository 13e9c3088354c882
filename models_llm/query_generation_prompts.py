"""DisastIR's query-generation prompts (App. B, Tables 4-9) as the paper prints them, one preset per search intent:
the information-need stage (P_IN) and the query stage (P_QG), with the values the captions list for each
placeholder. The released code (github:KaiYin97/Disaster_IR, configs/query_gen_prompts.json, MIT) asks for a hard
negative too and takes the first information need; docs/retrieval.md says where this follows which."""
from __future__ import annotations

_QA_NEED = (
    "Brainstorm a list of useful text retrieval tasks where the goal is: Given a user question, "
    "retrieve passages that directly answer the question. Here are a few examples: Given a question "
    "about evacuation procedures during a flood, retrieve a passage that explains the steps involved. "
    "Given a question about the cause of infrastructure failure in a disaster, retrieve a passage "
    "identifying the cause. Given a question about relief funding timelines, retrieve a passage "
    "providing the relevant information. Guidelines: Each task description should be one sentence "
    "that clearly describes the user question and the kind of answer passages to be retrieved. Focus "
    "on real-world domains like disaster planning, relief logistics, early warning systems, community "
    "impact, government response, etc. Your output should be a JSON list of 3 strings, each "
    "describing a distinct and useful text retrieval task. Only output the list. Be creative. No "
    "explanations or additional content."
)
_QA_QUERY = (
    "You have been assigned a retrieval task: {task}. Your mission is to write one text retrieval "
    "example for this task in JSON format. The JSON object must contain the following keys:\n"
    "\n"
    "- user_query: a string, a random user search query specified by the retrieval task.\n"
    "- positive_document: a string, a relevant document for the user query.\n"
    "\n"
    "Please adhere to the following guidelines:\n"
    "\n"
    "- The user_query should be {query_length}, {clarity}.\n"
    "- All documents must be created independent of the query. Avoid copying the query verbatim. It "
    "is acceptable if some parts of the positive_document are not topically related to the query.\n"
    "- All documents should be {num_words} long.\n"
    "- Do not provide any explanation in any document on why it is relevant or not relevant to the "
    "query. The query and documents must be realistic and inspired by real-world content (e.g., "
    "disaster management). All generated content should be in English no matter the provided content "
    "language is.\n"
    "- Both the query and documents require {difficulty} level education to understand.\n"
    "\n"
    "Your output must always be a JSON object only, do not explain yourself or output anything else. "
    "Be creative!"
)

_QADOC_NEED = (
    "Brainstorm a list of document retrieval tasks, where the goal is: Given a user query, retrieve "
    "documents that provide useful and relevant answers. Here are a few examples to get you started: "
    "Given a query about emergency evacuation procedures, retrieve a document that outlines the "
    "proper steps. Given a query asking how heatwaves affect public health, retrieve a document "
    "discussing the medical or environmental impacts. Given a query about funding for post-disaster "
    "recovery, retrieve a document describing the financial aid process. Given a query on how early "
    "warning systems reduce disaster risk, retrieve a document explaining their function and "
    "benefits. Guidelines: Each task should be a single sentence describing what the query is and "
    "what kind of document should be retrieved in response. Tasks should span a broad range of "
    "information needs, from facts to procedures to causal relationships. Focus on disaster "
    "management-related themes such as risk mitigation, emergency logistics, climate impact, "
    "institutional roles, and infrastructure damage. Your output should be a JSON list of 20 strings, "
    "each describing a distinct and useful text retrieval task. Only output the list. No "
    "explanations."
)
_QADOC_QUERY = (
    "You have been assigned a document retrieval task: {task}. Your mission is to write one example "
    "for this task in JSON format. The JSON object must include:\n"
    "\n"
    "- user_query: a single, well-formed, natural language query that clearly asks for information "
    "based on the assigned task.\n"
    "\n"
    "Guidelines: The query can be answered by the content provided in the following given paragraph. "
    "The query should reflect a realistic information need in the disaster management domain. Avoid "
    "generic or overly broad questions—make the query specific and grounded in actual scenarios "
    "(e.g., logistics, policies, actions). Use language inspired by real-world usage, such as what a "
    "policymaker, journalist, or emergency planner might ask. Output only a single JSON object with a "
    "user_query field. No extra formatting, documents, or explanations. Be clear, informative, and "
    "realistic!"
)

_TWITTER_NEED = (
    "Brainstorm a list of entity retrieval tasks where the goal is to retrieve tweets that mention or "
    "provide relevant information about one or more entities (e.g., organizations, people, locations, "
    "events) found in the query. Here are a few examples to inspire your thinking: Given a query "
    "referencing \"UNICEF,\" retrieve tweets about their emergency relief efforts. Given a query about "
    "\"Cyclone Mocha,\" retrieve tweets reporting its impact or aftermath. Given a query that mentions "
    "\"World Health Organization,\" retrieve tweets that discuss their role in disaster health "
    "responses. Given a query with \"Manila,\" retrieve tweets about disaster conditions or relief "
    "actions in that location. Guidelines: Each task should be a single sentence describing a "
    "situation where an entity is referenced and tweets related to that entity should be retrieved. "
    "Focus on disaster management-related entities such as emergency response agencies, international "
    "organizations, locations, events, or key figures. Encourage diversity in topics: ground "
    "response, aid distribution, weather events, infrastructure failure, etc. Your output should be a "
    "JSON list of about 3 strings, each describing a different NER Twitter retrieval task. No "
    "explanations or extra formatting. Be concise, diverse, and realistic."
)
_TWITTER_QUERY = (
    "You have been assigned an entity-tweet retrieval task: {task}. Your mission is to write one "
    "example for this task in JSON format. The JSON object must include:\n"
    "\n"
    "- query: a sentence that mentions one or more disaster management-related entities.\n"
    "- positive_tweet: a tweet that provides relevant and informative content about the mentioned "
    "entity or entities.\n"
    "\n"
    "Guidelines: The query should clearly mention a recognizable entity tied to the disaster domain. "
    "The positive_tweet should be informal, observational, or emotional—realistic Twitter-style "
    "language providing relevant details about the entity. All content should be inspired by disaster "
    "management-related themes such as rescue missions, weather events, humanitarian aid, response "
    "coordination, etc. Your output must be a single JSON object only. No explanation, no formatting "
    "beyond JSON. Keep it realistic and natural in tone."
)

_FC_NEED = (
    "Brainstorm a list of fact-checking retrieval tasks where the goal is: Given a claim, retrieve "
    "documents that either support or refute the claim, while distinguishing them from topically "
    "similar documents that do not address the claim's veracity. Here are a few examples to guide "
    "your ideas: Given a claim about the effectiveness of early warning systems during floods, "
    "retrieve documents that either support or refute the claim. Given a claim about the number of "
    "people displaced by a recent earthquake, retrieve evidence that verifies or challenges it. Given "
    "a claim about the government's relief distribution timeline, retrieve text that affirms or "
    "contradicts the stated timeline. Given a claim about the relationship between climate change and "
    "disaster frequency, retrieve relevant supporting or refuting content. Guidelines: Each task "
    "should be one sentence and describe what the claim is about and what kind of evidence is needed "
    "(support or refute). Base the topics on real-world domains such as disaster management, "
    "humanitarian aid, policy, climate, health impacts, etc. The tasks should vary in specificity and "
    "format (e.g., statistical claim, causal claim, factual assertion). Your output should be a JSON "
    "list of about 3 strings, each string representing a distinct fact-checking retrieval task. "
    "Output only the list. No explanations. Be creative and diverse in topic!"
)
_FC_QUERY = (
    "You have been assigned a fact-checking retrieval task: {task}. Your mission is to write one "
    "fact-checking retrieval instance in JSON format. The JSON object must contain:\n"
    "\n"
    "- claim: a short, factual or semi-factual statement (assertion) related to the task.\n"
    "- positive_document: a paragraph that supports or refutes the claim.\n"
    "\n"
    "Guidelines: The claim should be {query_length}, {clarity}. The positive document must clearly "
    "support or refute the claim—either is acceptable. The claim should be clear, concise, and "
    "specific—not overly vague or too broad. Use examples from realistic disaster management-related "
    "content: climate events, emergency response, humanitarian relief, damage estimates, etc. All "
    "positive documents should be {num_words} long. All generated content should be in English no "
    "matter the provided content language is. Both the claim and documents must be understandable "
    "with {difficulty} level education. Output only a single JSON object. No additional text. Be "
    "precise and creative!"
)

_NLI_NEED = (
    "Brainstorm a list of Natural Language Inference (NLI) retrieval tasks. In these tasks, the "
    "objective is: Given a premise sentence from a paragraph (e.g., about disaster management), "
    "retrieve a hypothesis sentence that is logically entailed by the premise. Here are a few "
    "examples to inspire your creativity: Given a sentence describing a government emergency "
    "response, retrieve a hypothesis that reflects an outcome or implication of that action. Given a "
    "statement about climate-induced hazards, retrieve a hypothesis summarizing the likely impact. "
    "Given a factual description of infrastructure damage, retrieve a hypothesis about the services "
    "affected. Given a claim about disaster preparedness strategies, retrieve a hypothesis that is "
    "logically supported by it. Guidelines: Each task description should be one sentence and should "
    "clearly specify the type of premise and the nature of the entailed hypothesis. Tasks should be "
    "generalizable across topics but inspired by domains such as climate, crisis response, risk, "
    "logistics, etc. Be diverse in topic and formality: from news-like to academic to conversational. "
    "Your output should be a JSON list of about 3 strings, each describing a different NLI retrieval "
    "task. Output only the list of task descriptions, no explanations."
)
_NLI_QUERY = (
    "You have been assigned an NLI retrieval task: {task}. Your mission is to write one example for "
    "this task in JSON format. The JSON object must include:\n"
    "\n"
    "- premise: a sentence drawn or inspired from a paragraph (e.g., about disaster management).\n"
    "- entailed_hypothesis: a sentence that must logically follow from the premise.\n"
    "\n"
    "Guidelines: The premise should be {query_length}, {clarity}. Use realistic examples from domains "
    "like climate risk, emergency response, infrastructure, health, or logistics, etc. Ensure the "
    "entailed hypothesis is non-trivial and clearly follows from the premise. Avoid word-for-word "
    "overlap between the sentences unless necessary for clarity. entailed_hypothesis should be "
    "{num_words} long. All generated content should be in English no matter the provided content "
    "language is. All contents require {difficulty} level education to understand and should be "
    "diverse in terms of topic and length. Output a single JSON object only. Do not explain yourself "
    "or add anything else. Be creative and accurate!"
)

_STS_NEED = (
    "Brainstorm a list of similar sentence retrieval tasks where the goal is: Given a sentence, "
    "retrieve other sentences that express the same or very similar meaning (paraphrases or "
    "semantically equivalent expressions). Here are a few examples to inspire your ideas: Given a "
    "sentence describing the impact of a flood, retrieve other sentences that paraphrase or closely "
    "restate the same impact. Given a sentence about the steps taken during emergency evacuation, "
    "retrieve sentences that express the same process using different wording. Given a sentence about "
    "climate-related disasters increasing in frequency, retrieve other sentences conveying the same "
    "trend. Given a factual statement about relief distribution, retrieve sentences that express the "
    "same fact using alternate phrasing. Guidelines: Each task should be written in one sentence and "
    "describe the kind of sentence (source) and what type of similar sentences should be retrieved. "
    "Focus on disaster management-related themes such as risk, policy, action, climate, or aid—but "
    "vary topics for diversity. Your output should be a JSON list of about 3 strings, each one "
    "describing a distinct similar sentence retrieval task. Output the list only. No explanations. Be "
    "creative and precise."
)
_STS_QUERY = (
    "You have been assigned a similar sentence retrieval task: {task}. Your mission is to write one "
    "example for this task in JSON format. The JSON object must contain:\n"
    "\n"
    "- query: a single sentence that expresses a specific idea.\n"
    "- positive: a sentence that expresses the same meaning as the query (semantic equivalence or "
    "high similarity).\n"
    "\n"
    "Guidelines: The query should be {query_length}, {clarity}. The query and positive should be "
    "semantically equivalent, possibly using different wording or structure. Avoid copy-paste or "
    "trivial rewordings—be realistic and diverse. Use examples inspired by real-world disaster "
    "management-related content: emergency protocols, environmental impact, infrastructure, "
    "humanitarian response, etc. All positive documents should be {num_words} long. All generated "
    "content should be in English no matter the provided content language is. Both the query and "
    "documents must be understandable with {difficulty} level education. Output only a single JSON "
    "object. No explanation. Make it high-quality and realistic!"
)

CLARITIES = ("clear", "understandable with some effort", "ambiguous")
DIFFICULTIES = ("elementary school", "high school", "college", "PhD")
# Tables 4-6 (QA, QAdoc, Twitter) share their captions' values; QAdoc's and Twitter's query prompts use none.
_QA_LENGTHS = ("less than 10 words", "5 to 20 words", "less than 20 words", "at least 50 words", "at least 150 words")
_QA_NUM_WORDS = ("at least 100 words", "at least 200 words", "at most 50 words", "50 to 150 words")
_QA_VALUES = {"query_length": _QA_LENGTHS, "clarity": CLARITIES, "difficulty": DIFFICULTIES, "num_words": _QA_NUM_WORDS}
_FC_VALUES = {"query_length": ("less than 10 words", "5 to 20 words", "at least 10 words", "at least 20 words",
                               "at least 50 words"),
              "clarity": CLARITIES, "difficulty": DIFFICULTIES,
              "num_words": ("at most 15 words", "at most 50 words", "50 to 150 words", "at most 100 words",
                            "at least 100 words")}
_NLI_VALUES = {"query_length": ("less than 10 words", "5 to 20 words", "at least 20 words", "at least 50 words",
                                "at least 150 words"),
               "clarity": CLARITIES, "difficulty": DIFFICULTIES,
               "num_words": ("less than 10 words", "5 to 20 words", "at least 20 words", "at least 50 words",
                             "at most 50 words")}
_STS_LENGTHS = ("less than 10 words", "5 to 20 words", "at least 50 words", "at most 50 words")
_STS_VALUES = {"query_length": _STS_LENGTHS, "clarity": CLARITIES, "difficulty": DIFFICULTIES,
               "num_words": _STS_LENGTHS}

# intent -> (need prompt, query prompt, the answer's query key, its positive key (None: the seed passage is the
# positive, QAdoc's document), the placeholders' values).
PAPER_PRESETS = {
    "QA": (_QA_NEED, _QA_QUERY, "user_query", "positive_document", _QA_VALUES),
    "QAdoc": (_QADOC_NEED, _QADOC_QUERY, "user_query", None, _QA_VALUES),
    "Twitter": (_TWITTER_NEED, _TWITTER_QUERY, "query", "positive_tweet", _QA_VALUES),
    "FC": (_FC_NEED, _FC_QUERY, "claim", "positive_document", _FC_VALUES),
    "NLI": (_NLI_NEED, _NLI_QUERY, "premise", "entailed_hypothesis", _NLI_VALUES),
    "STS": (_STS_NEED, _STS_QUERY, "query", "positive", _STS_VALUES),
}
